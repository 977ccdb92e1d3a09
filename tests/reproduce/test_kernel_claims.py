"""The checks that measure the kernel from inside (kernel_trace columns): each passes on data
with the paper's shape and fails on data without it; a run without the columns, or a machine
without the capability, never passes."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from harness.analysis import derive
from harness.reproduce import capabilities, claims
from harness.reproduce.verdict import Status, evaluate_claim
from tests.reproduce.test_claims import as_read, points

WINDOW_S = 1.0
DISPATCH_CALLS = 1000


def dispatch(family: str, share_pct: float, cpu_server_pct: float = 10.0) -> dict:
    """A traced point whose dispatch call took share_pct of the server's CPU (the tracer's
    on-CPU time and schedstat's agreeing): 1,000 calls in a 1 s window, each as long as that
    share needs."""
    ns_per_call = share_pct / 100 * cpu_server_pct / 100 * 1e9 * WINDOW_S / DISPATCH_CALLS
    return {"cpu_server_pct": cpu_server_pct, "kernel_trace_window_s": WINDOW_S,
            "kernel_server_on_cpu_s": cpu_server_pct / 100 * WINDOW_S,
            f"kernel_{family}_calls": DISPATCH_CALLS, f"kernel_{family}_ns_per_call": ns_per_call}


def stack(syscall_ns: float, rx_ns: float, tx_packets: int = 0, tx_ns: float | None = None,
          socket_ns: float | None = None) -> dict:
    """A traced stream point: 1,000 packets in and out of the server, whose writes took
    syscall_ns per packet; the receive softirq rx_ns per packet, the transmit one tx_ns. With
    socket_ns (function grain), tcp_sendmsg took the rest of the writes' time."""
    row = {"packets_in": 400, "packets_out": 600, "kernel_write_calls": 500,
           "kernel_write_ns_per_call": syscall_ns * 1000 / 500, "kernel_read_calls": 0,
           "kernel_read_ns_per_call": None, "kernel_server_cpu_rx_ns_per_packet": rx_ns,
           "kernel_server_cpu_tx_packets": tx_packets,
           "kernel_server_cpu_tx_ns_per_packet": tx_ns}
    if socket_ns is not None:
        row.update({"kernel_fn_tcp_sendmsg_calls": 500,
                    "kernel_fn_tcp_sendmsg_ns_per_call": (syscall_ns - socket_ns) * 1000 / 500,
                    "kernel_fn_tcp_recvmsg_calls": 0, "kernel_fn_tcp_recvmsg_ns_per_call": None})
    return row


def statuses(target: str, rows: list[dict]) -> list[Status]:
    measured = as_read(points(rows))
    return [evaluate_claim(c, measured, None).status for c in claims.CLAIMS[target]
            if c.needs in ("kernel_trace", "function_grain")]


def test_the_dispatch_share_is_its_in_kernel_time_over_the_servers_cpu():
    derived = derive.add_derived(pd.DataFrame([dispatch("select", 25.0),
                                               {"cpu_server_pct": 10.0}]))
    assert derived.loc[0, "kernel_dispatch_share_pct"] == pytest.approx(25.0)
    assert pd.isna(derived.loc[1, "kernel_dispatch_share_pct"])  # not traced: not 0


def test_the_stack_per_packet_adds_its_layers():
    derived = derive.add_derived(pd.DataFrame([stack(2000.0, 3000.0),
                                               stack(2000.0, 3000.0, tx_packets=100, tx_ns=500.0),
                                               {"packets_in": 600, "packets_out": 400}]))
    assert derived["kernel_syscall_ns_per_packet"].tolist()[:2] == [2000.0, 2000.0]
    # a transmit softirq that sent no packet cost nothing
    assert derived["kernel_stack_ns_per_packet"].tolist()[:2] == [5000.0, 5500.0]
    assert derived.loc[2, ["kernel_syscall_ns_per_packet",
                           "kernel_stack_ns_per_packet"]].isna().all()


def on_cpu(family: str, cpu_pct: float, cpu_server_pct: float = 100.0) -> dict:
    """A traced point whose dispatch call took cpu_pct of its CPU's time over the window."""
    return dispatch(family, 100 * cpu_pct / cpu_server_pct, cpu_server_pct)


def fig1(shares: tuple[float, float, float]) -> list[dict]:
    return [{"hot_conns": hot, "cold_conns": cold, **on_cpu("select", share)}
            for hot in (10, 50) for cold, share in zip((0, 1000, 2000), shares, strict=True)]


@pytest.mark.parametrize("shares,rises,flattens", [
    ((5.0, 30.0, 40.0), True, True),     # the paper's: rising, then levelling off
    ((5.0, 30.0, 25.0), False, True),    # falls at the last step
    ((5.0, 10.0, 40.0), True, False),    # rising ever faster: no flattening
    ((5.0, 7.0, 8.0), False, True),      # rising, bending, but < 2× over the sweep
])
def test_bm98_fig1_both_ways(shares, rises, flattens):
    assert statuses("bm98-fig1", fig1(shares)) == [
        Status.PASS if rises else Status.FAIL, Status.PASS if flattens else Status.FAIL]


def test_bm98_fig1_reads_the_share_of_the_cpu_not_of_the_servers_time():
    """select's time rising linearly with cold connections (5, 30, 55 % of the CPU) while the
    server's own CPU time grows with it: over the server's time the share bends (50, 60,
    65 %), over the CPU's it does not."""
    rows = [{"hot_conns": 50, "cold_conns": cold, **on_cpu("select", cpu, server)}
            for cold, cpu, server in ((0, 5.0, 10.0), (1000, 30.0, 50.0), (2000, 55.0, 84.6))]
    (rises, bends) = [evaluate_claim(c, as_read(points(rows)), None)
                      for c in claims.CLAIMS["bm98-fig1"]]
    assert rises.status == Status.PASS, rises.detail
    assert bends.status == Status.FAIL and "rises 25, 25" in bends.detail, bends.detail


@pytest.mark.parametrize("cpu_pct,passed", [(15.0, True), (40.0, True), (6.0, False),
                                            (50.0, False)])
def test_bm98_table1_select_share_of_the_cpu_both_ways(cpu_pct, passed):
    """The paper's 21.91 % of the CPU within a factor of 2 either way."""
    row = {**on_cpu("select", cpu_pct, cpu_server_pct=60.0), "cpu_idle_pct": 35.0}
    (select, _, _) = [evaluate_claim(c, as_read(points([row])), None)
                      for c in claims.CLAIMS["bm98-table1-2"]]
    assert select.status == (Status.PASS if passed else Status.FAIL), select.detail
    assert "CPU idle 35 % (the paper's 1.32 %)" in select.detail


def test_the_share_is_of_the_tracers_on_cpu_time_not_schedstats():
    """In-kernel time over the server's on-CPU time, both the tracer's (one clock): schedstat's
    run time, another clock, is not the denominator, whatever it read."""
    row = {**dispatch("select", 30.0), "cpu_server_pct": 5.0}  # schedstat read half
    derived = derive.add_derived(pd.DataFrame([row]))
    assert derived.loc[0, "kernel_dispatch_share_pct"] == pytest.approx(30.0)


def test_a_record_without_its_window_is_not_measured():
    """A share of the CPU over the window needs the window: not measured, never a pass."""
    row = {**on_cpu("select", 20.0), "kernel_trace_window_s": None}
    (result, _, _) = [evaluate_claim(c, as_read(points([row])), None)
                      for c in claims.CLAIMS["bm98-table1-2"]]
    assert result.status == Status.FAIL and "not measured" in result.detail, result.detail


@pytest.mark.parametrize("select_pct,epoll_pct,passed", [
    (30.0, 0.5, [True, True, True]),    # the paper's 34 % and < 1 %, 60×
    (30.0, 2.0, [True, False, False]),  # epoll above the paper's 1 %: 15×
    (10.0, 0.2, [False, True, True]),   # select below 34 % / 2
])
def test_bmd99_table2_each_share_of_the_cpu_both_ways(select_pct, epoll_pct, passed):
    rows = [{"dispatch": "select", **on_cpu("select", select_pct, 40.0)},
            {"dispatch": "epoll", **on_cpu("epoll_wait", epoll_pct, 5.0)}]
    results = [evaluate_claim(c, as_read(points(rows)), None)
               for c in claims.CLAIMS["bmd99-table2"]]
    assert [r.status for r in results] == [Status.PASS if p else Status.FAIL for p in passed]
    assert f"select {select_pct:.3g} %, epoll {epoll_pct:.3g} %" in results[2].detail


def test_bmd99_table2_without_epoll_calls_is_not_measured():
    rows = [{"dispatch": "select", **on_cpu("select", 30.0)},
            {"dispatch": "epoll", "cpu_server_pct": 10.0, "kernel_trace_window_s": 1.0,
             "kernel_server_on_cpu_s": 0.1, "kernel_epoll_wait_calls": 0}]
    (_, epoll, ratio) = [evaluate_claim(c, as_read(points(rows)), None)
                         for c in claims.CLAIMS["bmd99-table2"]]
    assert epoll.status == ratio.status == Status.FAIL
    assert "not measured" in epoll.detail and "not measured" in ratio.detail


@pytest.mark.parametrize("ns_per_call,passed", [
    ((1_000.0, 1_050.0, 1_020.0), True),      # a bitmap: flat, as today's Linux
    ((1_000.0, 1_000.0, 2_500.0), False),     # rising past 2× at the most descriptors
    ((1_000.0, 400.0, 1_000.0), False),       # a fall below half is not flat either
])
def test_bm98_ufalloc_checks_the_new_bitmaps_flat_cost_both_ways(ns_per_call, passed):
    rows = [{"dispatch": d, "cold_conns": cold, "kernel_accept_calls": 100,
             "kernel_accept_ns_per_call": ns}
            for d in ("select", "epoll") for cold, ns in zip((0, 7500, 15000), ns_per_call,
                                                             strict=True)]
    assert statuses("bm98-ufalloc", rows) == [Status.PASS if passed else Status.FAIL]


def test_the_old_linear_ufalloc_is_not_possible_here():
    """No kernel here searches descriptors linearly: Table 1's ufalloc share and the old
    search's rise are NOT POSSIBLE HERE, with or without a run."""
    for target, index in (("bm98-ufalloc", 0), ("bm98-table1-2", 1)):
        claim = claims.CLAIMS[target][index]
        why = capabilities.missing(claim.needs, None)
        assert "bitmap" in why
        result = evaluate_claim(claim, as_read(points([on_cpu("select", 20.0)])), why)
        assert result.status == Status.NOT_POSSIBLE


CONNS = (4, 32, 128, 512, 2048)


@pytest.mark.parametrize("syscall,passed", [
    ((1000.0, 1000.0, 1200.0, 2500.0, 4000.0), [True, True]),  # the paper's: up past 128
    ((1000.0, 1000.0, 1000.0, 1000.0, 1000.0), [False, False]),  # flat
    ((1000.0, 1000.0, 3000.0, 2500.0, 4000.0), [False, True]),   # a dip past 128
])
def test_cpp_fig5_both_ways(syscall, passed):
    """The stack (writes + 3,000 ns) and the System Call layer (half the writes' time)."""
    rows = [{"stream_conns": c, **stack(s, 3000.0, socket_ns=s / 2)}
            for c, s in zip(CONNS, syscall, strict=True)]
    assert statuses("cpp-fig5", rows) == [Status.PASS if p else Status.FAIL for p in passed]


@pytest.mark.parametrize("rx_at_40,syscall_at_40,passed", [
    (6000.0, 1100.0, [True, True]),    # TCP almost doubles, the rest flat
    (3300.0, 1500.0, [False, False]),  # receive flat, the system calls rise
])
def test_cpp_fig6_both_ways(rx_at_40, syscall_at_40, passed):
    rows = [{"one_way_delay_ms": 0, **stack(2000.0, 3000.0, socket_ns=1000.0)},
            {"one_way_delay_ms": 10, **stack(2050.0, 4500.0, socket_ns=1050.0)},
            {"one_way_delay_ms": 40, **stack(2000.0, rx_at_40, socket_ns=syscall_at_40)}]
    assert statuses("cpp-fig6", rows) == [Status.PASS if p else Status.FAIL for p in passed]


@pytest.mark.parametrize("rx_at_300,passed", [(3500.0, True), (5000.0, False)])
def test_cpp_fig4_every_bandwidth_both_ways(rx_at_300, passed):
    """stack 5,000 ns per packet at 100 Mbit/s; at 300, +10 % (flat) or +40 %."""
    rows = [{"stream_mbps": 100, **stack(2000.0, 3000.0)},
            {"stream_mbps": 200, **stack(2000.0, 3100.0)},
            {"stream_mbps": 300, **stack(2000.0, rx_at_300)}]
    assert statuses("cpp-fig4", rows) == [Status.PASS if passed else Status.FAIL]


def test_a_flat_curve_of_one_point_is_not_measured():
    """A --quick run sweeps one bandwidth: nothing to call flat."""
    (result,) = [evaluate_claim(c, as_read(points([{"stream_mbps": 100,
                                                    **stack(2000.0, 3000.0)}])), None)
                 for c in claims.CLAIMS["cpp-fig4"] if c.needs == "kernel_trace"]
    assert result.status == Status.FAIL and "one level only" in result.detail


@pytest.mark.parametrize("socket,passed", [(1000.0, False), (1200.0, True), (1500.0, False)])
def test_cpp_table1_system_call_share_both_ways(socket, passed):
    """The System Call layer of a stack of 2,000 + 4,300 ns (writes, receive softirq): 16,
    19 and 24 %, against the paper's 18-20 %: a share under the paper's fails as one above it
    does; the writes' whole time (32 %, TCP's transmit inside it) is not what is judged."""
    assert statuses("cpp-table1", [stack(2000.0, 4300.0, socket_ns=socket)]) == [
        Status.PASS if passed else Status.FAIL]


@pytest.mark.parametrize("target", ["cpp-fig5", "cpp-fig6", "cpp-table1"])
def test_the_system_call_layer_is_not_possible_without_function_grain(target):
    """fentry refused: the System Call layer cannot be told from TCP under the write, so its
    claims say NOT POSSIBLE HERE, not FAIL, on a traced run."""
    refused = {"tracepoints": True, "fentry": False, "detail": "fentry refused (EPERM)"}
    why = capabilities.missing("function_grain", runs_tracing(refused))
    assert why and "fentry" in why
    rows = [{"stream_conns": c, "one_way_delay_ms": c, **stack(2000.0, 3000.0)} for c in (4, 40)]
    needing = [c for c in claims.CLAIMS[target] if c.needs == "function_grain"]
    assert needing
    for claim in needing:
        assert evaluate_claim(claim, as_read(points(rows)), why).status == Status.NOT_POSSIBLE


@pytest.mark.parametrize("target", ["bm98-fig1", "bm98-table1-2", "bmd99-table2",
                                    "bm98-ufalloc", "cpp-fig4", "cpp-fig5", "cpp-fig6",
                                    "cpp-table1"])
def test_a_run_that_did_not_trace_never_passes(target):
    """The scenarios' sweeps without any kernel column: not measured, a FAIL saying so."""
    rows = [{"dispatch": d, "hot_conns": 50, "cold_conns": c, "cpu_server_pct": 10.0,
             "stream_conns": c or 4, "stream_mbps": 100 + c, "one_way_delay_ms": c / 100,
             "packets_in": 600, "packets_out": 400}
            for d in ("select", "epoll") for c in (0, 1000, 2000)]
    measured = as_read(points(rows))
    for claim in claims.CLAIMS[target]:
        if claim.needs == "kernel_trace":
            result = evaluate_claim(claim, measured, None)
            assert result.status == Status.FAIL and "not measured" in result.detail, result


def runs_tracing(recorded: dict | None) -> SimpleNamespace:
    return SimpleNamespace(raw_manifests={"r1": {"kernel_trace": recorded}})


def test_the_kernel_trace_capability_is_read_from_the_run():
    refused = {"tracepoints": True, "fentry": False, "detail": "fentry refused (EPERM)"}
    assert capabilities.missing("kernel_trace", runs_tracing(refused)) is None
    assert "fentry refused (EPERM)" in capabilities.missing("function_grain",
                                                            runs_tracing(refused))
    no_bpf = {"tracepoints": False, "fentry": False, "detail": "no CAP_BPF; fix: root"}
    assert capabilities.missing("kernel_trace", runs_tracing(no_bpf)) == (
        "eBPF tracing of the kernel (no CAP_BPF; fix: root)")
    # a run that did not ask to trace lacks no capability: its claims find no columns
    assert capabilities.missing("kernel_trace", runs_tracing(None)) is None


def ufalloc_row(accept_pct: float, alloc_fd_pct: float | None = None) -> dict:
    """A traced select point whose accepts took accept_pct of the CPU over the 1 s window,
    and, where fentry timed it, alloc_fd alloc_fd_pct."""
    row = {**on_cpu("select", 11.0, 20.0), "kernel_accept_calls": 1000.0,
           "kernel_accept_ns_per_call": accept_pct / 100 * 1e9 * WINDOW_S / 1000}
    if alloc_fd_pct is not None:
        row |= {"kernel_fn_alloc_fd_calls": 1000.0,
                "kernel_fn_alloc_fd_ns_per_call": alloc_fd_pct / 100 * 1e9 * WINDOW_S / 1000}
    return row


@pytest.mark.parametrize("accept_pct,alloc_fd_pct,status,says", [
    (0.12, None, Status.PASS, "an upper bound"),       # accept itself under Table 2's 0.90 %
    (3.0, None, Status.FAIL, "not measured"),          # the bound decides nothing
    (3.0, 0.05, Status.PASS, "kernel_alloc_fd_cpu_pct 0.05 %"),  # fentry timed alloc_fd
    (3.0, 1.5, Status.FAIL, "✗"),                      # alloc_fd itself above 0.90 %
])
def test_ufalloc_virtually_none_both_ways(accept_pct, alloc_fd_pct, status, says):
    ufalloc = claims.CLAIMS["bm98-table1-2"][2]
    result = evaluate_claim(ufalloc, as_read(points([ufalloc_row(accept_pct, alloc_fd_pct)])),
                            None)
    assert result.status == status and says in result.detail, result.detail
