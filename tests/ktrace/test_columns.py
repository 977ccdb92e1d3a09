"""The kernel columns from wb-ktrace's document: per call, per packet, per reply; null where
nothing was traced, never zero for what was not measured."""

from __future__ import annotations

from typing import Any

import pytest

from harness.metrics import ktrace
from harness.results.format import KERNEL_FAMILIES, KERNEL_TRACE_COLUMNS


def family(calls: int = 0, kernel_ns: int = 0, returned: int = 0) -> dict[str, Any]:
    return {"calls": calls, "kernel_ns": kernel_ns, "off_cpu_ns": 0, "softirq_ns": 0,
            "returned": returned, "errors": 0, "hist_log2_ns": [0] * 32}


def cpu(n: int, rx_ns: int, rx: int, tx_ns: int, tx: int, softirqs: int = 1) -> dict[str, Any]:
    return {"cpu": n, "net_rx_ns": rx_ns, "net_rx_count": softirqs, "net_tx_ns": tx_ns,
            "net_tx_count": 1, "rx_packets": rx, "tx_packets": tx}


DOCUMENT = {
    "window_ns": 2_000_000_000,
    "window": {"start_ns": 5_000_000_000, "end_ns": 7_000_000_000},
    "on_cpu_ns": {"server": 150_000_000},
    "roles": {"server": {**{name: family() for name in KERNEL_FAMILIES},
                         "select": family(1000, 30_000_000, 5000),
                         "write": family(4000, 12_000_000, 400_000)}},
    "cpus": [cpu(0, 3_000_000, 1000, 0, 0, softirqs=250), cpu(1, 1_000_000, 1000, 500, 2000)],
    "events": {"runs": 90_000, "traced": 9000, "untimed": 0, "followed": 0},
}


def test_without_a_document_every_kernel_column_is_null():
    row = ktrace.columns(None)
    assert set(row) == set(KERNEL_TRACE_COLUMNS)
    assert all(value is None for value in row.values())
    assert all(v is None for v in ktrace.per_reply({**row, "reply_rate_rps": 100.0}).values())


def test_a_document_gives_per_call_per_packet_and_per_reply_columns():
    row = ktrace.columns(DOCUMENT)
    assert set(row) == set(KERNEL_TRACE_COLUMNS)
    assert row["kernel_select_calls"] == 1000
    assert row["kernel_select_ns_per_call"] == 30_000
    assert row["kernel_select_ready_per_call"] == 5
    assert row["kernel_write_ns_per_call"] == 3000
    # a family never called has no time per call, but a count of 0
    assert row["kernel_epoll_wait_calls"] == 0
    assert row["kernel_epoll_wait_ns_per_call"] is None
    assert row["kernel_epoll_wait_ready_per_call"] is None
    assert row["kernel_rx_packets"] == 2000 and row["kernel_rx_ns_per_packet"] == 2000
    assert row["kernel_rx_softirqs"] == 251 and row["kernel_tx_softirqs"] == 2
    assert row["kernel_tx_packets"] == 2000 and row["kernel_tx_ns_per_packet"] == 0.25
    assert row["kernel_events_traced"] == 9000
    assert row["kernel_trace_window_s"] == 2.0
    assert row["kernel_server_on_cpu_s"] == 0.15
    assert ktrace.WindowEdges.of(DOCUMENT) == ktrace.WindowEdges(5_000_000_000, 7_000_000_000)
    # without the server's CPU, its own softirq columns stay null
    assert row["kernel_server_cpu_rx_packets"] is None


@pytest.mark.parametrize("server_cpu,rx_ns,tx_packets", [(0, 3000, 0), (1, 1000, 2000)])
def test_the_server_cpus_own_softirqs_beside_the_machines(server_cpu, rx_ns, tx_packets):
    """The softirqs that ran on the server's CPU alone (its host's, where the topology steers
    each host's receive work to its own CPU), whichever CPU that is; machine-wide unchanged."""
    row = ktrace.columns(DOCUMENT, server_cpu)
    assert row["kernel_server_cpu_rx_packets"] == 1000
    assert row["kernel_server_cpu_rx_ns_per_packet"] == rx_ns
    assert row["kernel_server_cpu_tx_packets"] == tx_packets
    assert row["kernel_rx_packets"] == 2000 and row["kernel_rx_ns_per_packet"] == 2000
    # 1,000 replies a second over the 2 s traced: 2,000 replies
    per_reply = ktrace.per_reply({**row, "reply_rate_rps": 1000.0})
    assert per_reply["kernel_select_ns_per_reply"] == 15_000
    assert per_reply["kernel_write_ns_per_reply"] == 6000
    assert per_reply["kernel_epoll_wait_ns_per_reply"] == 0.0  # traced, and never called


@pytest.mark.parametrize("rate", [None, 0.0])
def test_no_replies_means_no_time_per_reply(rate: float | None):
    row = {**ktrace.columns(DOCUMENT), "reply_rate_rps": rate}
    assert all(value is None for value in ktrace.per_reply(row).values())
