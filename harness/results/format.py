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
# A points row's reasons: their sentences in invalid_reason, their clients.validity codes in
# invalid_codes, each column one string (Parquet and pandas store, filter and group strings
# as they are; `str.split(CODE_SEPARATOR)` gives the list), null when the row is valid.
REASON_SEPARATOR = "; "
CODE_SEPARATOR = ","
# The long tables: each is the concatenation of the point records' rows of that name.
LONG_TABLE_COLUMNS = {
    "timeseries": ("run_id", "point_id", "repetition", "t_s", "source", "metric", "value"),
    "histograms": ("run_id", "point_id", "repetition", "kind", "lo_us", "hi_us", "count"),
    "profiles": ("run_id", "point_id", "repetition", "symbol", "layer", "samples", "pct"),
}
TABLES = ("points", *LONG_TABLE_COLUMNS)
REQUIRED_MANIFEST_KEYS = ("schema_version", "run_id", "scenario_name", "kernel")


class ResultsFormatError(ValueError):
    """A run directory does not follow docs/results-format.md."""


def table_file(name: str) -> str:
    return f"{name}.parquet"


def new_run_id(kernel_release: str) -> str:
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + kernel_release


def kernel_release_of(run_id: str) -> str:
    return run_id.split("-", 1)[1]
