"""What a run directory holds: schema version, run ids, tables and their columns."""

from __future__ import annotations

import time

SCHEMA_VERSION = 1

ID_COLUMNS = ("run_id", "scenario", "point_id", "repetition", "kernel_release")
# Every points row has these (harness.scenario.parameter_columns makes them, in this order);
# a sweep axis may add more, and the manifest's `parameters` lists them all.
PARAMETER_COLUMNS = (
    "server",
    "dispatch",
    "accept",
    "reply_bytes",
    "workers",
    "hot_conns",
    "cold_conns",
    "offered_rate_rps",
    "one_way_delay_ms",
    "generator",
    "stream_conns",
    "stream_mbps",
)
REQUIRED_POINT_COLUMNS = (*ID_COLUMNS, *PARAMETER_COLUMNS, "valid")
# The long tables: each is the concatenation of the point records' rows of that name.
LONG_TABLE_COLUMNS = {
    "timeseries": ("run_id", "point_id", "repetition", "t_s", "source", "metric", "value"),
    "histograms": ("run_id", "point_id", "repetition", "kind", "lo_us", "hi_us", "count"),
    "profiles": ("run_id", "point_id", "repetition", "symbol", "layer", "samples", "pct"),
}
TABLES = ("points", *LONG_TABLE_COLUMNS)

# In-kernel time over a point's window (wb-ktrace, eBPF; `kernel_trace: true`), null where it
# did not run. The system-call families in wb-ktrace's order (`wb-ktrace --describe`;
# tests/ktrace/test_describe.py holds the two together), the event-dispatch ones, those whose
# return value counts ready descriptors, and the columns: per family, per direction of the
# network softirqs.
KERNEL_FAMILIES = ("select", "poll", "epoll_wait", "io_uring_enter", "sigtimedwait", "accept",
                   "read", "write")
KERNEL_DISPATCH_FAMILIES = KERNEL_FAMILIES[:5]
KERNEL_READY_FAMILIES = ("select", "poll", "epoll_wait")
KERNEL_FAMILY_METRICS = ("calls", "ns_per_call", "ns_per_reply")
KERNEL_DIRECTIONS = ("rx", "tx")


def kernel_column(family_or_direction: str, metric: str) -> str:
    """e.g. kernel_select_ns_per_call, kernel_rx_ns_per_packet."""
    return f"kernel_{family_or_direction}_{metric}"


KERNEL_TRACE_COLUMNS = (
    *(kernel_column(f, m) for f in KERNEL_FAMILIES for m in KERNEL_FAMILY_METRICS),
    *(kernel_column(f, "ready_per_call") for f in KERNEL_READY_FAMILIES),
    *(kernel_column(d, m) for d in KERNEL_DIRECTIONS for m in ("packets", "ns_per_packet")),
    "kernel_events_traced",
    "kernel_trace_window_s",
)
REQUIRED_MANIFEST_KEYS = ("schema_version", "run_id", "scenario_name", "kernel")


class ResultsFormatError(ValueError):
    """A run directory does not follow docs/results-format.md."""


def table_file(name: str) -> str:
    return f"{name}.parquet"


def new_run_id(kernel_release: str) -> str:
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + kernel_release


def kernel_release_of(run_id: str) -> str:
    return run_id.split("-", 1)[1]
