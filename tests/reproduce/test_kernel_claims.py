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


def stack(syscall_ns: float, rx_ns: float, tx_packets: int = 0, tx_ns: float | None = None
          ) -> dict:
    """A traced stream point: 1,000 packets in and out of the server, whose reads took
    syscall_ns per packet; the receive softirq rx_ns per packet, the transmit one tx_ns."""
    return {"packets_in": 600, "packets_out": 400, "kernel_read_calls": 500,
            "kernel_read_ns_per_call": syscall_ns * 1000 / 500, "kernel_write_calls": 0,
            "kernel_write_ns_per_call": None, "kernel_rx_ns_per_packet": rx_ns,
            "kernel_tx_packets": tx_packets, "kernel_tx_ns_per_packet": tx_ns}


def statuses(target: str, rows: list[dict]) -> list[Status]:
    measured = as_read(points(rows))
    return [evaluate_claim(c, measured, None).status for c in claims.CLAIMS[target]
            if c.needs == "kernel_trace"]


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


def fig1(shares: tuple[float, float, float]) -> list[dict]:
    return [{"hot_conns": hot, "cold_conns": cold, **dispatch("select", share)}
            for hot in (10, 50) for cold, share in zip((0, 1000, 2000), shares, strict=True)]


@pytest.mark.parametrize("shares,rises,flattens", [
    ((5.0, 30.0, 40.0), True, True),     # the paper's: rising, then levelling off
    ((5.0, 30.0, 25.0), False, True),    # falls at the last step
    ((5.0, 10.0, 40.0), True, False),    # rising ever faster: no flattening
    ((5.0, 7.0, 9.0), False, True),      # rising, but < 2× over the sweep
])
def test_bm98_fig1_both_ways(shares, rises, flattens):
    assert statuses("bm98-fig1", fig1(shares)) == [
        Status.PASS if rises else Status.FAIL, Status.PASS if flattens else Status.FAIL]


@pytest.mark.parametrize("share,passed", [(15.0, True), (6.0, False)])
def test_bm98_table1_select_share_both_ways(share, passed):
    assert statuses("bm98-table1-2", [dispatch("select", share)]) == [
        Status.PASS if passed else Status.FAIL]


def test_the_share_is_of_the_tracers_on_cpu_time_not_schedstats():
    """In-kernel time over the server's on-CPU time, both the tracer's (one clock): schedstat's
    run time, another clock, is not the denominator, whatever it read."""
    row = {**dispatch("select", 30.0), "cpu_server_pct": 5.0}  # schedstat read half
    derived = derive.add_derived(pd.DataFrame([row]))
    assert derived.loc[0, "kernel_dispatch_share_pct"] == pytest.approx(30.0)


def test_a_record_without_the_tracers_on_cpu_time_is_not_measured():
    """Records traced before the tracer counted the server's on-CPU time have no share of it:
    not measured, never a pass."""
    row = {**dispatch("select", 30.0), "kernel_server_on_cpu_s": None}
    (result, _) = [evaluate_claim(c, as_read(points([row])), None)
                   for c in claims.CLAIMS["bm98-table1-2"]]
    assert result.status == Status.FAIL and "not measured" in result.detail, result.detail


@pytest.mark.parametrize("epoll_share,passed", [(0.5, True), (2.0, False)])
def test_bmd99_table2_each_share_measured_both_ways(epoll_share, passed):
    rows = [{"dispatch": "select", **dispatch("select", 30.0)},
            {"dispatch": "epoll", **dispatch("epoll_wait", epoll_share)}]
    measured = as_read(points(rows))
    (result,) = [evaluate_claim(c, measured, None) for c in claims.CLAIMS["bmd99-table2"]]
    assert result.status == (Status.PASS if passed else Status.FAIL), result.detail
    assert f"select 30 %, epoll {epoll_share:.3g} %" in result.detail


def test_bmd99_table2_without_epoll_calls_is_not_measured():
    rows = [{"dispatch": "select", **dispatch("select", 30.0)},
            {"dispatch": "epoll", "cpu_server_pct": 10.0, "kernel_trace_window_s": 1.0,
             "kernel_server_on_cpu_s": 0.1, "kernel_epoll_wait_calls": 0}]
    (result,) = [evaluate_claim(c, as_read(points(rows)), None)
                 for c in claims.CLAIMS["bmd99-table2"]]
    assert result.status == Status.FAIL and "not measured" in result.detail


@pytest.mark.parametrize("ns_per_call,passed", [
    ((1_000.0, 50_000.0, 100_000.0), True),   # the old kernel's linear search
    ((1_000.0, 1_050.0, 1_020.0), False),     # a bitmap: flat, as today's Linux
])
def test_bm98_ufalloc_checks_the_old_kernels_linear_cost_both_ways(ns_per_call, passed):
    rows = [{"dispatch": d, "cold_conns": cold, "kernel_accept_calls": 100,
             "kernel_accept_ns_per_call": ns}
            for d in ("select", "epoll") for cold, ns in zip((0, 7500, 15000), ns_per_call,
                                                             strict=True)]
    assert statuses("bm98-ufalloc", rows) == [Status.PASS if passed else Status.FAIL]


CONNS = (4, 32, 128, 512, 2048)


@pytest.mark.parametrize("syscall,passed", [
    ((1000.0, 1000.0, 1200.0, 2500.0, 4000.0), [True, True]),  # the paper's: up past 128
    ((1000.0, 1000.0, 1000.0, 1000.0, 1000.0), [False, False]),  # flat
    ((1000.0, 1000.0, 3000.0, 2500.0, 4000.0), [False, True]),   # a dip past 128
])
def test_cpp_fig5_both_ways(syscall, passed):
    rows = [{"stream_conns": c, **stack(s, 3000.0)} for c, s in zip(CONNS, syscall, strict=True)]
    assert statuses("cpp-fig5", rows) == [Status.PASS if p else Status.FAIL for p in passed]


@pytest.mark.parametrize("rx_at_40,syscall_at_40,passed", [
    (6000.0, 1100.0, [True, True]),    # TCP almost doubles, the rest flat
    (3300.0, 1500.0, [False, False]),  # receive flat, the system calls rise
])
def test_cpp_fig6_both_ways(rx_at_40, syscall_at_40, passed):
    rows = [{"one_way_delay_ms": 0, **stack(1000.0, 3000.0)},
            {"one_way_delay_ms": 10, **stack(1050.0, 4500.0)},
            {"one_way_delay_ms": 40, **stack(syscall_at_40, rx_at_40)}]
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


@pytest.mark.parametrize("syscall,passed", [(1000.0, True), (3000.0, False)])
def test_cpp_table1_system_call_share_both_ways(syscall, passed):
    assert statuses("cpp-table1", [stack(syscall, 5000.0)]) == [
        Status.PASS if passed else Status.FAIL]


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


def test_ufalloc_needs_function_grain_and_says_so_where_fentry_is_refused():
    (_, ufalloc) = claims.CLAIMS["bm98-table1-2"]
    refused = {"tracepoints": True, "fentry": False, "detail": "fentry refused (EPERM)"}
    why = capabilities.missing(ufalloc.needs, runs_tracing(refused))
    result = evaluate_claim(ufalloc, as_read(points([dispatch("select", 20.0)])), why)
    assert result.status == Status.NOT_POSSIBLE and "fentry" in result.detail
    # where fentry works but the run has no alloc_fd column: not measured, never a pass
    assert evaluate_claim(ufalloc, as_read(points([dispatch("select", 20.0)])),
                          None).status == Status.FAIL


@pytest.mark.parametrize("share_pct,passed", [
    (10.0, True),  # ≥ the paper's 17.8 % / 2
    (5.0, False),  # today's bitmap allocator, cheaper than the 1998 linear scan
])
def test_ufalloc_where_fentry_times_alloc_fd_both_ways(share_pct, passed):
    (_, ufalloc) = claims.CLAIMS["bm98-table1-2"]
    # the server ran 10 % of one CPU over the 1 s window (100 ms); alloc_fd took 1,000 calls
    server_ns = 0.10 * 1e9 * WINDOW_S
    row = {**dispatch("select", 20.0, cpu_server_pct=10.0),
           "kernel_fn_alloc_fd_calls": 1000.0,
           "kernel_fn_alloc_fd_ns_per_call": share_pct / 100 * server_ns / 1000}
    result = evaluate_claim(ufalloc, as_read(points([row])), None)
    assert result.status == (Status.PASS if passed else Status.FAIL), result.detail
