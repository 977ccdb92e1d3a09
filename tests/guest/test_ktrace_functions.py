"""Function grain where fentry works: Debian's 6.12 kernel under virtme-ng (TCG here, where
fentry loads; on this machine's own kernel it is refused) runs tests/guest/ktrace_inside.py,
in the one boot that tests/guest/both_inside.py makes.
What the kernel's source makes exact is asserted exactly:
- do_select runs once per select() (pselect6 -> core_sys_select -> do_select): SELECTS calls,
  not one more for the OUTSIDE_SELECTS a process outside the measured tree made in the window;
- each send() is one tcp_sendmsg and each recv() of a whole 100-byte message one tcp_recvmsg;
- every packet received on loopback (netif_receive_skb) is IPv4 TCP: one ip_rcv and one
  tcp_v4_rcv each, give or take the packets in flight at the window's edges (PACKETS_AT_EDGES);
  every packet loopback sent (net_dev_xmit) went through one dev_queue_xmit;
- a function not in this kernel's BTF (6.12 inlines ep_poll, and has __netif_receive_skb_core
  only as a .constprop clone) is skipped, named, and its columns are null; dev_queue_xmit, an
  inline wrapper of __dev_queue_xmit since 5.19, is timed as that;
- nothing of wb-ktrace is loaded afterwards (bpftool)."""

from __future__ import annotations

import pytest

from harness.metrics import ktrace
from harness.results.format import KERNEL_FUNCTIONS, kernel_function_column
from tests.guest.conftest import measured_part

PACKETS_AT_EDGES = 2

pytestmark = [pytest.mark.slow, pytest.mark.guest, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def measured(kernel_6_12_measured):
    measured = measured_part(kernel_6_12_measured, "ktrace.json")
    for window in ("select", "tcp"):
        for function, timed in measured[window]["functions"].items():
            if timed["calls"]:
                print(f"{window}: {function} (as {timed['timed_as']}) {timed['calls']} calls, "
                      f"{timed['kernel_ns'] / timed['calls']:.0f} ns per call")
    return measured


def test_fentry_works_in_the_guest(measured):
    assert measured["probe"]["fentry"] is True, measured["probe"]
    assert measured["select"]["fentry"] is True


def test_each_function_is_timed_or_skipped_and_named(measured):
    document = measured["select"]
    timed, skipped = set(document["functions"]), set(document["functions_skipped"])
    assert timed | skipped == set(KERNEL_FUNCTIONS) and not timed & skipped
    assert skipped == set(measured["probe"]["functions_skipped"])
    for function in skipped:
        assert f"wb-ktrace: {function} skipped: " in measured["loader_said"]
    renamed = {f: t["timed_as"] for f, t in document["functions"].items() if t["timed_as"] != f}
    assert renamed == measured["probe"]["functions_timed_as"]
    for function, body in renamed.items():
        assert f"wb-ktrace: {function} timed as {body} " in measured["loader_said"]
    row = ktrace.columns(document)
    for function in skipped:
        assert row[kernel_function_column(function, "calls")] is None


def test_n_selects_over_1000_descriptors_are_n_do_select_calls_whatever_others_do(measured):
    document, selects = measured["select"], measured["selects"]
    assert document["functions"]["do_select"]["calls"] == selects
    row = ktrace.columns(document)
    assert row["kernel_fn_do_select_calls"] == selects == row["kernel_select_calls"]
    # do_select is inside select's system call: no longer than it, and most of it (the
    # scan of 1,000 descriptors; the rest is copying the sets in and out)
    assert 0.5 * row["kernel_select_ns_per_call"] < row["kernel_fn_do_select_ns_per_call"] \
        <= row["kernel_select_ns_per_call"]


def test_loopback_round_trips_give_known_calls_and_one_receive_per_packet(measured):
    document, trips = measured["tcp"], measured["round_trips"]
    functions, row = document["functions"], ktrace.columns(document)
    assert functions["tcp_sendmsg"]["calls"] == 2 * trips
    assert functions["tcp_recvmsg"]["calls"] == 2 * trips
    packets = row["kernel_rx_packets"]
    assert packets >= 2 * trips  # a data segment each way per round trip, and ACKs
    for function in ("ip_rcv", "tcp_v4_rcv"):
        assert abs(functions[function]["calls"] - packets) <= PACKETS_AT_EDGES, function
        assert row[kernel_function_column(function, "ns_per_packet")] > 0
    sent = row["kernel_tx_packets"]
    assert abs(functions["dev_queue_xmit"]["calls"] - sent) <= PACKETS_AT_EDGES
    # tcp_v4_rcv is called by ip_rcv (through ip_local_deliver): inside its time
    assert row["kernel_fn_tcp_v4_rcv_ns_per_call"] < row["kernel_fn_ip_rcv_ns_per_call"]


def test_the_programs_were_loaded_in_the_window_and_nothing_is_left(measured):
    assert any(name.startswith("kt_in_do_sel") for name in measured["held"]), measured["held"]
    assert any(name.startswith("link to kt_out_do_sel") for name in measured["held"])
    assert measured["left"] == []
