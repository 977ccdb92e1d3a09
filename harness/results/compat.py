"""Points rows of runs written in an earlier version of the results format, upgraded once,
at load, to the current one, a step per version keyed on the version the run stored (as
flent's unserialise_compat upgrades older data files): what a newer recorder writes beside
its verdict is derived from what they stored, never judged again.

Version 1 (every run before the version moved, and a run that stored none) to 2: version 1
covers every recorder before the facts' columns were declared, so each column is filled
where a row lacks it, its recorded values kept:
- invalid_codes: from the sentences of invalid_reason (the only place old text is matched);
- interference_only: from those codes' kinds;
- server_cpus: the CPUs the server could use, from the run's manifest (clients.validity's
  server_cpus);
- server_saturated: clients.validity's rule on the row's own columns, where it was not
  recorded (runs before the rule; a column a version 1 run never measured counts as not
  measured)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pandas as pd

from clients import validity
from clients.validity import Code
from harness.results.format import CODE_SEPARATOR, SCHEMA_VERSION, stored_version

# How each rule's sentence began before codes were stored. A reason starts the text, follows
# another's "; ", or follows the name of the cluster host it was one shard's ("hot-a: ").
_OLD_SENTENCES = (
    (Code.LATE_SENDS, r"late sends: "),
    (Code.GENERATOR_SATURATED, r"generator CPU saturated"),
    (Code.NO_LOCAL_PORT, r"the generator ran out of local ports"),
    (Code.OUT_OF_DESCRIPTORS, r"httperf ran out of descriptors"),
    (Code.SHARDS_UNFINISHED, r"\d+ of \d+ generator shard\(s\) did not finish"),
    (Code.RATE_SHORTFALL, r"offered load not delivered"),
    (Code.NO_REPLIES, r"no replies in the measured window"),
    (Code.SHORT_WINDOW, r"measured window [\d.]+ s of the"),
    (Code.REFUSED, r"[\d,]+ connections refused"),
    (Code.SERVER_EXITED, r"the server exited during the point"),
    (Code.COLD_LOST, r"only [\d,]+ of [\d,]+ cold connections"),
    (Code.STEAL, r"\d+ % CPU steal during the window"),
    (Code.CROWDED_SERVER, r"the server waited for its CPU"),
    (Code.FOREIGN_WORK, r"another task ran on (CPU \d+|the server's CPU) for \d+ % of the "
                        r"window: the cycles per packet"),
    (Code.CLOSED_LOOP_ELSEWHERE, r"closed loop"),
    (Code.EMULATED_CPU, re.escape(validity.EMULATED_CPU)),
    (Code.CLOCK_OFFSET, r"the clock of \S+ is"),
    (Code.WORKER_LOST, r"worker \S+ was lost"),
)
_START = r"(?:^|; )(?:[\w.-]+: )?"
_FOUND = re.compile("|".join(f"{_START}(?P<{code.name}>{pattern})"
                             for code, pattern in _OLD_SENTENCES))
# the late-sends sentence another task's time on the generator's CPU explained went on so
_CROWDED_LATE = re.compile(r": another task ran on the generator's CPU for [\d.]+ % of the "
                           r"window")


def upgrade_points(points: pd.DataFrame, manifest: dict[str, Any]) -> pd.DataFrame:
    """points, stored by the run of manifest, in the shape of the current version: each step
    from the version it stored on."""
    for version in range(stored_version(manifest), SCHEMA_VERSION):
        points = UPGRADES[version](points, manifest)
    return points


def _from_version_1(points: pd.DataFrame, manifest: dict[str, Any]) -> pd.DataFrame:
    """A version 1 run's points with the columns version 2's recorder writes beside its
    verdict (the module's list), each filled where a row lacks it."""
    points = points.copy()
    codes = points["invalid_reason"].map(codes_of_sentences) if "invalid_reason" in points \
        else pd.Series(None, index=points.index, dtype=object)
    points["invalid_codes"] = _filled(points, "invalid_codes", codes)
    points["interference_only"] = _filled(points, "interference_only",
                                          codes.map(_interference_only))
    points["server_cpus"] = _filled(points, "server_cpus", _server_cpus(points, manifest))
    points["server_saturated"] = _filled(points, "server_saturated", _saturated(points))
    return points


def codes_of_sentences(reason: object) -> str | None:
    """The codes of an old invalid_reason, in the order its sentences came; a reason that
    names no rule was a point's failure (not_measured)."""
    if not isinstance(reason, str) or not reason.strip():
        return None
    codes = []
    for match in _FOUND.finditer(reason):
        code = Code[match.lastgroup]
        if code is Code.LATE_SENDS and _CROWDED_LATE.search(reason, match.end(),
                                                            _next_start(reason, match.end())):
            code = Code.GENERATOR_CROWDED
        codes.append(code)
    return CODE_SEPARATOR.join(codes or [Code.NOT_MEASURED])


def _interference_only(codes: object) -> bool:
    return isinstance(codes, str) and all(
        Code(code).kind is validity.Kind.INTERFERENCE for code in codes.split(CODE_SEPARATOR))


def _next_start(reason: str, after: int) -> int:
    following = _FOUND.search(reason, after)
    return following.start() if following else len(reason)


def _filled(points: pd.DataFrame, column: str, values: pd.Series) -> pd.Series:
    """The column as recorded, its missing values (or all of it, in runs before it) from
    values."""
    if column not in points:
        return values
    recorded = points[column]
    return recorded if recorded.notna().all() else recorded.astype(object).where(
        recorded.notna(), values)


def _number(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def _server_cpus(points: pd.DataFrame, manifest: dict[str, Any]) -> pd.Series:
    """clients.validity.server_cpus for each row: its budget (a column, swept or fixed:
    harness.results.runset), the scenario's pinning, the row's workers (one for a server
    other than wb-server), the run's machine's CPUs."""
    scenario = manifest.get("scenario") or {}
    pinned = (scenario.get("cpus") or {}).get("server") is not None
    machine = (manifest.get("cpu") or {}).get("count") or 1
    budgets = points.get("server_budget_pct", pd.Series(None, index=points.index))
    workers = points.get("workers", pd.Series(None, index=points.index))
    return pd.Series([validity.server_cpus(_number(budget), pinned, int(_number(n) or 1),
                                           machine)
                      for budget, n in zip(budgets, workers, strict=True)],
                     index=points.index, dtype=float)


def _saturated(points: pd.DataFrame) -> pd.Series:
    """clients.validity.server_saturated on each row's columns."""
    def column(name: str) -> pd.Series:
        return points.get(name, pd.Series(None, index=points.index))

    return pd.Series(
        [validity.server_saturated(_number(reply), _number(offered), _number(cpu),
                                   float(cpus), _number(wait))
         for reply, offered, cpu, cpus, wait in zip(
             column("reply_rate_rps"), column("offered_rate_rps"), column("cpu_server_pct"),
             points["server_cpus"], column("server_wait_pct"), strict=True)],
        index=points.index, dtype="boolean")


# The step from each earlier version to the next: a version's bump adds its own.
UPGRADES: dict[int, Callable[[pd.DataFrame, dict[str, Any]], pd.DataFrame]] = {
    1: _from_version_1,
}
