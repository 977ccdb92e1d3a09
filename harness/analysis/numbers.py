"""Numbers for people, in every report: 39,940 / 99.6 / 0.173, never 1.534e+04; each metric
in its own format, times scaled to their value (54.0 µs, 3.40 ms, 1.20 s, as wrk2 and
hyperfine print them); and the short names a terminal table's headers and point labels use."""

from __future__ import annotations

import math
import re
from typing import Any

MISSING = "—"
# A column's unit suffix -> seconds per unit (harness.results.format names every time column
# with one of these).
SECONDS_PER_UNIT = {"_s": 1.0, "_ms": 1e-3, "_us": 1e-6, "_ns": 1e-9}
# Largest first: a time is printed in the first unit it reaches one of. One spelling: µs.
TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))
# Rates are counts per second: whole numbers at any magnitude a server reaches.
WHOLE_SUFFIXES = ("_rps", "_pps")
PERCENT_SUFFIX = "_pct"

# Short names for terminal tables (80 columns) and point labels (`dispatch=select cold=0`).
# A time column's name carries no unit: its values carry theirs.
SHORT_NAMES = {
    "reply_rate_rps": "replies/s",
    "stream_throughput_mbps": "Mbit/s",
    "cpu_server_pct": "CPU %",
    "resp_time_p50_ms": "p50",
    "resp_time_p99_ms": "p99",
    "steal_pct": "steal %",
    "kernel_dispatch_ns_per_call": "kernel/call",
    "cold_conns": "cold",
    "hot_conns": "hot",
    "offered_rate_rps": "offered/s",
    "one_way_delay_ms": "delay",
    "reply_bytes": "bytes",
    "stream_conns": "streams",
    "server_budget_pct": "budget %",
}


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def human(value: float | None) -> str:
    """At least 3 significant digits, thousands separated; "—" for a missing value."""
    if _missing(value):
        return MISSING
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    digits = 2 - math.floor(math.log10(abs(value)))
    return f"{value:,.{digits}f}"


def percent(fraction: float) -> str:
    """-0.4983 -> '-49.8' (signed, without the unit)."""
    if _missing(fraction):
        return MISSING
    value = fraction * 100
    if math.isinf(value):
        return "+inf" if value > 0 else "-inf"
    return f"{value:+,.0f}" if abs(value) >= 1000 else f"{value:+.1f}"


def duration(seconds: float | None) -> str:
    """A time in the largest unit it reaches one of: 54.0 µs, 3.40 ms, 460 ms, 1.20 s."""
    if _missing(seconds):
        return MISSING
    if seconds == 0:
        return "0 s"
    for unit, scale in TIME_UNITS:
        if abs(seconds) >= scale or unit == TIME_UNITS[-1][0]:
            return f"{human(seconds / scale)} {unit}"
    raise AssertionError("unreachable: the last unit takes any value")


def time_scale(column: str) -> float | None:
    """Seconds per unit of a time column (resp_time_p99_ms: 1e-3), or of a time per event
    (kernel_select_ns_per_call: 1e-9), None for any other."""
    time = re.sub(r"_per_[a-z]+$", "", column)
    return next((scale for suffix, scale in SECONDS_PER_UNIT.items()
                 if time.endswith(suffix)), None)


def metric(column: str, value: Any) -> str:
    """A value of a column, in the column's format: times scaled (3.40 ms), rates whole
    (40,583), percentages to one decimal (99.5), other numbers by human(); text as it is."""
    if _missing(value):
        return MISSING
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    scale = time_scale(column)
    if scale is not None:
        return duration(value * scale)
    if column.endswith(WHOLE_SUFFIXES):
        return f"{value:,.0f}"
    if column.endswith(PERCENT_SUFFIX):
        return f"{value:,.1f}"
    return f"{value:,}" if isinstance(value, int) else human(value)


# A column's unit as people write it, from its name's suffix (longest suffixes first).
COLUMN_UNITS = {"_ms": "ms", "_us": "µs", "_ns": "ns", "_s": "s", "_pct": "%",
                "_mbps": "Mbit/s", "_mhz": "MHz"}


def column_unit(column: str) -> str:
    """The unit of a column's values and of a threshold on it ('' for rates and counts)."""
    return next((unit for suffix, unit in COLUMN_UNITS.items() if column.endswith(suffix)), "")


def in_column_unit(column: str, value: Any) -> str:
    """A value in its column's own unit, as a threshold on the column is written: 0.977 ms
    beside "< 0.01 ms", never 977 µs beside it; rates and counts as metric() prints them."""
    unit = column_unit(column)
    if not unit or _missing(value):
        return metric(column, value)
    return f"{human(value)} {unit}"


def short_name(column: str) -> str:
    """A column's name in a terminal table or a point label."""
    return SHORT_NAMES.get(column, column)


def point_label(values: dict[str, Any]) -> str:
    """A point by its sweep values: `dispatch=select cold=1,000`."""
    return " ".join(f"{short_name(column)}={metric(column, value)}"
                    for column, value in values.items()) or "point"
