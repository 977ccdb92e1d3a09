"""What a run directory holds: schema version, run ids, the manifest and its sessions, point
records, tables, their columns and the kind of value each column holds, and the columns the
validity rules read."""

from __future__ import annotations

import functools
import numbers
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from clients.schema import SCHEMA_VERSION

if TYPE_CHECKING:
    import pandas as pd

# The version of a run that stored none: the first, before the manifest said (each version's
# shape and its upgrade to the next: harness/results/compat.py).
UNVERSIONED = 1

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

# The kind of value a column holds (nulls aside). A column named with a unit is a number; a
# column named neither here nor with a unit (a sweep axis of the scenario's) may hold anything.
TEXT, INTEGER, NUMBER, BOOLEAN = "text", "an integer", "a number", "true or false"
UNIT_SUFFIXES = ("_rps", "_pct", "_ms", "_us", "_s", "_mbps", "_mhz")


@dataclass(frozen=True)
class FactColumn:
    """A points column one of clients.validity's rules reads: the WindowFacts field it is, the
    kind of value it holds and its unit."""

    name: str
    fact: str
    kind: str
    unit: str


# What the runner's samplers and recorder measured over the window, as the rules read it: the
# recorder builds a point's WindowFacts from these columns (harness.results.facts) and refuses
# a row without one, so that renaming a column cannot turn its rule off unseen. Every points
# row of this version holds them (null where not measured) besides WINDOW_COLUMNS, whose edge
# offsets the window rule reads.
FACT_COLUMNS = (
    FactColumn("cpu_generator_pct", "generator_cpu_pct", NUMBER, "% of one CPU"),
    FactColumn("generator_wait_pct", "generator_wait_pct", NUMBER, "% of the window"),
    FactColumn("other_generator_cpu_pct", "other_generator_cpu_pct", NUMBER, "% of the window"),
    FactColumn("generator_wait_others_pct", "generator_wait_others_pct", NUMBER,
               "% of the window"),
    FactColumn("cpu_server_pct", "server_cpu_pct", NUMBER, "% of one CPU"),
    FactColumn("server_wait_pct", "server_wait_pct", NUMBER, "% of the window"),
    FactColumn("other_server_cpu_pct", "other_server_cpu_pct", NUMBER, "% of the window"),
    FactColumn("server_wait_others_pct", "server_wait_others_pct", NUMBER, "% of the window"),
    FactColumn("steal_server_cpu_pct", "steal_server_pct", NUMBER, "% of the CPU's time"),
    FactColumn("steal_generator_cpu_pct", "steal_generator_pct", NUMBER, "% of the CPU's time"),
    FactColumn("reply_rate_rps", "reply_rps", NUMBER, "2xx replies per second"),
    FactColumn("server_cpus", "server_cpus", NUMBER, "CPUs"),
    FactColumn("cold_held", "cold_held", INTEGER, "connections"),
    FactColumn("window_s", "window_s", NUMBER, "s"),
)
COLUMN_KINDS = {
    **dict.fromkeys(("run_id", "scenario", "point_id", "kernel_release", "server", "dispatch",
                     "accept", "generator", "invalid_reason", "lost_host", "source", "metric",
                     "kind", "symbol", "layer"), TEXT),
    **dict.fromkeys(("repetition", "attempt", "window_start_ns", "window_end_ns"), INTEGER),
    **dict.fromkeys(("reply_bytes", "workers", "hot_conns", "cold_conns", "stream_conns",
                     "value", "count", "samples", "pct"), NUMBER),
    **dict.fromkeys(("valid", "server_saturated", "interference_only", "cycles_estimated",
                     "server_carried_over"), BOOLEAN),
    **{column.name: column.kind for column in FACT_COLUMNS},
}

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
# The network softirqs that ran on the server's CPU alone, per direction: its host's own
# receive and transmit work where the topology steers each host's receive work to the CPU of
# its processes (bulk-pair's receive_on_own_cpu); machine-wide (KERNEL_DIRECTIONS) they also
# hold the peer's on this one machine.
SERVER_CPU_SCOPE = "server_cpu_"
KERNEL_SERVER_CPU_DIRECTIONS = tuple(SERVER_CPU_SCOPE + d for d in KERNEL_DIRECTIONS)


def kernel_column(family_or_direction: str, metric: str) -> str:
    """e.g. kernel_select_ns_per_call, kernel_rx_ns_per_packet."""
    return f"kernel_{family_or_direction}_{metric}"


def server_cpu_column(direction: str, metric: str) -> str:
    """A softirq column of the server's CPU alone, e.g. kernel_server_cpu_rx_ns_per_packet."""
    return kernel_column(SERVER_CPU_SCOPE + direction, metric)


# Function grain (fentry/fexit, where the kernel allows it; null where it does not or where
# the function is not in the kernel's BTF): the functions the papers timed, in wb-ktrace's
# order (its --describe; tests/ktrace/test_describe.py), each with the direction of the
# packets its time is counted per (the received ones for dispatch and receive, the sent ones
# for transmit).
KERNEL_FUNCTIONS = {
    "do_select": "rx", "do_sys_poll": "rx", "ep_poll": "rx", "alloc_fd": "rx",
    "tcp_sendmsg": "tx", "tcp_recvmsg": "rx", "tcp_v4_rcv": "rx", "ip_rcv": "rx",
    "__netif_receive_skb_core": "rx", "dev_queue_xmit": "tx",
}
KERNEL_FUNCTION_METRICS = ("calls", "ns_per_call", "ns_per_packet")


def kernel_function_column(function: str, metric: str) -> str:
    """e.g. kernel_fn_do_select_ns_per_call, kernel_fn_tcp_v4_rcv_ns_per_packet."""
    return f"kernel_fn_{function}_{metric}"


KERNEL_TRACE_COLUMNS = (
    *(kernel_column(f, m) for f in KERNEL_FAMILIES for m in KERNEL_FAMILY_METRICS),
    *(kernel_column(f, "ready_per_call") for f in KERNEL_READY_FAMILIES),
    *(kernel_column(d, m) for d in (*KERNEL_DIRECTIONS, *KERNEL_SERVER_CPU_DIRECTIONS)
      for m in ("packets", "softirqs", "ns_per_packet")),
    *(kernel_function_column(f, m) for f in KERNEL_FUNCTIONS for m in KERNEL_FUNCTION_METRICS),
    "kernel_events_traced",
    "kernel_trace_window_s",
    # the server tree's time on a CPU in the traced window, on the calls' own clock: what their
    # in-kernel time is a share of
    "kernel_server_on_cpu_s",
)


# The window (harness.runner.window): the runner's, on CLOCK_MONOTONIC, and the edges each
# source of the point's numbers actually used, as its offset from the runner's edge (ms;
# null where the source did not run): the hot generator's own count, the server's stats
# reads, the samplers' readings, wb-ktrace over the server, wb-whoran over the
# generator's and over the server's CPU.
WINDOW_SOURCES = ("generator", "server_stats", "sampler", "kernel_trace", "who_ran_generator",
                  "who_ran_server")


def edge_column(source: str, edge: str) -> str:
    """e.g. edge_generator_start_ms: the source's start less the runner's, in ms."""
    return f"edge_{source}_{edge}_ms"


WINDOW_COLUMNS = (
    "window_start_ns", "window_end_ns", "window_s",
    *(edge_column(source, edge) for source in WINDOW_SOURCES for edge in ("start", "end")),
)
FACT_COLUMN_NAMES = tuple(dict.fromkeys((*(c.name for c in FACT_COLUMNS), *WINDOW_COLUMNS)))
# A points row's verdict (harness.results.rows: verdict_columns; read back by
# harness.results.verdict), in every row of this version.
VERDICT_COLUMNS = ("valid", "invalid_reason", "invalid_codes", "interference_only")


# The columns every points table of each version holds as stored (a sweep axis may add more):
# checked before its rows are upgraded (harness.results.compat), so that a run of this version
# missing one is refused by the column's name.
STORED_POINT_COLUMNS = {
    1: REQUIRED_POINT_COLUMNS,
    2: tuple(dict.fromkeys((*REQUIRED_POINT_COLUMNS, *VERDICT_COLUMNS, *FACT_COLUMN_NAMES))),
}


class ResultsFormatError(ValueError):
    """A run directory does not follow docs/results-format.md."""


# what a finished run says of its points, for other tools (docs/results-format.md)
SUMMARY_FILE = "summary.json"


def table_file(name: str) -> str:
    return f"{name}.parquet"


def new_run_id(kernel_release: str, clash: int = 0) -> str:
    """The id of a run started now; clash: how many runs in its results folder already took
    this second's id (the second gets `.1`, and so on: ids sort in the order runs were made)."""
    return (time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + (f".{clash}" if clash else "")
            + "-" + kernel_release)


def kernel_release_of(run_id: str) -> str:
    return run_id.split("-", 1)[1]


class _Manifest(BaseModel):
    """The manifest keys that readers rely on, with their types; other keys are free."""

    model_config = ConfigDict(extra="allow", strict=True)

    schema_version: int = UNVERSIONED
    run_id: str
    scenario_name: str
    kernel: dict[str, Any]
    created_at: str | None = None
    scenario: dict[str, Any] | None = None
    scenario_dir: str | None = None
    sweep_axes: list[str] = []
    parameters: list[str] = []
    repetitions: int | None = None
    cpu: dict[str, Any] | None = None
    perf: dict[str, Any] | None = None
    topology: dict[str, Any] | None = None
    noise_sources: dict[str, Any] | None = None
    guest: dict[str, Any] | None = None
    cluster: dict[str, Any] | None = None
    resumptions: list[dict[str, Any]] = []


class _Record(BaseModel):
    """A point record: its points row and its rows of each long table."""

    model_config = ConfigDict(extra="forbid", strict=True)

    point: dict[str, Any]
    timeseries: list[dict[str, Any]] = []
    histograms: list[dict[str, Any]] = []
    profiles: list[dict[str, Any]] = []


def _problem(model: type[BaseModel], value: Any) -> str | None:
    """What is wrong with value as model, in a few words; None when nothing is."""
    if not isinstance(value, dict):
        return f"not a JSON object (a {type(value).__name__})"
    try:
        model.model_validate(value)
    except ValidationError as exc:
        errors = exc.errors()
        missing = [str(e["loc"][0]) for e in errors if e["type"] == "missing"]
        if missing:
            return "no " + ", ".join(f'"{key}"' for key in missing)
        first = errors[0]
        return f'"{".".join(map(str, first["loc"]))}": {first["msg"].lower()}'
    return None


def stored_version(manifest: dict[str, Any]) -> int:
    """The results format version a checked manifest's run was written in."""
    return manifest.get("schema_version", UNVERSIONED)


def check_manifest(value: Any, where: str) -> dict[str, Any]:
    """value, the manifest read from where, when this wanbench reads it (its version or an
    earlier one, which harness.results.compat upgrades); else why not."""
    problem = _problem(_Manifest, value)
    if problem:
        raise ResultsFormatError(f"{where}: {problem}: not the manifest of a wanbench run; "
                                 f"{DAMAGED_MANIFEST}")
    version = stored_version(value)
    if version > SCHEMA_VERSION:
        raise ResultsFormatError(
            f"{where}: schema_version {version}, newer than this wanbench reads (versions "
            f"{UNVERSIONED} to {SCHEMA_VERSION}): a newer wanbench wrote it; update this one "
            f"(git pull, then make deps), or read the run with the one that wrote it")
    if version < UNVERSIONED:
        raise ResultsFormatError(f"{where}: schema_version {version}: no such version (the "
                                 f"first is {UNVERSIONED}); {DAMAGED_MANIFEST}")
    return value


def check_record(value: Any, where: str) -> dict[str, Any]:
    """value, a point record read from where, when it is one; else why not."""
    problem = _problem(_Record, value)
    if problem:
        raise ResultsFormatError(f"{where}: {problem}: not a point record; {DAMAGED_RECORD}")
    return value


DAMAGED_MANIFEST = "restore it from a copy, or start a new run"
DAMAGED_RECORD = "the record is damaged: delete it (wanbench run --resume measures it again)"


def sessions(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's sessions, first to last: the one that created it (the manifest's own keys)
    and each `--resume` (its `resumptions`), each with its machine, load, noise, perf,
    topology, guest and cluster."""
    return [manifest, *manifest.get("resumptions", [])]


def topology_backend(manifest: dict[str, Any]) -> str | None:
    """The topology backend the run measured on: that of every session that brought a
    topology up, joined by " + " when they differ; None when none did."""
    backends = [b for s in sessions(manifest) if (b := (s.get("topology") or {}).get("backend"))]
    return " + ".join(dict.fromkeys(backends)) or None


def column_kind(name: str) -> str | None:
    if name in COLUMN_KINDS:
        return COLUMN_KINDS[name]
    return NUMBER if name.endswith(UNIT_SUFFIXES) else None


# numpy and pandas are imported where a frame is checked, not with the names above: the
# tracer's module reads those in a guest under TCG too, where importing pandas takes seconds
def _fits(value: Any, kind: str) -> bool:
    import numpy as np

    if kind == TEXT:
        return isinstance(value, str)
    if kind == BOOLEAN:
        return isinstance(value, bool | np.bool_)
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        return False
    return kind == NUMBER or float(value).is_integer()


@functools.cache  # a few dtypes, asked for each column of every table
def _typed_as(dtype: Any, kind: str) -> bool:
    """A column of this dtype holds only values of kind (an object column may hold any)."""
    import pandas as pd

    types = pd.api.types
    if kind == TEXT:
        return types.is_string_dtype(dtype) and not types.is_object_dtype(dtype)
    if kind == BOOLEAN:
        return types.is_bool_dtype(dtype)
    if kind == INTEGER:
        return types.is_integer_dtype(dtype)
    return types.is_numeric_dtype(dtype) and not types.is_bool_dtype(dtype)


def column_problem(frame: pd.DataFrame) -> str | None:
    """The first column of frame holding a value of another kind than its name says, with
    the value; None when every column holds what it should."""
    import numpy as np
    import pandas as pd

    for name, dtype in frame.dtypes.items():
        kind = column_kind(str(name))
        if kind is None or _typed_as(dtype, kind):
            continue
        for value in frame[name].array:
            if not _fits(value, kind) and not (pd.api.types.is_scalar(value) and pd.isna(value)):
                shown = value.item() if isinstance(value, np.generic) else value
                return f"column {name} holds {shown!r}, not {kind}"
    return None
