"""A run's points as people and CI read them: per point, in the scenario's sweep order, the
medians over valid repetitions, valid/total, the invalid repetitions' reasons, and each
threshold's verdict. The terminal table and summary.json (docs/results-format.md) both come
from here."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

import harness
from clients.validity import Code, Kind
from harness.analysis.numbers import point_label
from harness.results import verdict
from harness.results.format import ID_COLUMNS, PARAMETER_COLUMNS
from harness.scenario import Threshold

SUMMARY_FORMAT = 2  # 2: machine_too_busy
# `wanbench run`'s statuses for a finished run (docs/results-format.md), strongest first:
# a crossed threshold is a verdict, thresholds that could not be judged are no verdict (as
# compare's 3, inconclusive), invalid repetitions a run to look at.
EXIT_THRESHOLDS = 99  # as k6's thresholds
EXIT_UNJUDGED = 3
EXIT_INVALID = 1
FINISHED_STATUSES = (0, EXIT_INVALID, EXIT_UNJUDGED, EXIT_THRESHOLDS)
# Numeric columns of points.parquet that describe a row rather than measure it.
NOT_METRICS = {*ID_COLUMNS, *PARAMETER_COLUMNS, "attempt", "valid"}


@dataclass
class Reason:
    repetition: int
    codes: list[str]
    text: str


@dataclass
class ThresholdCheck:
    metric: str
    threshold: str
    value: float | None  # the point's median over valid repetitions; None: not measured
    passed: bool | None  # None: no valid repetition to judge (the run's exit 3 says so)


@dataclass
class PointSummary:
    point_id: str
    parameters: dict[str, Any]  # sweep column -> value
    valid: int
    total: int
    # Over valid repetitions; a point with none keeps its invalid repetitions' medians here,
    # marked by `medians_of_invalid`, so that what was measured is still shown.
    medians: dict[str, float | None]
    medians_of_invalid: bool
    reasons: list[Reason] = field(default_factory=list)
    thresholds: list[ThresholdCheck] = field(default_factory=list)


def _number(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def metric_columns(frame: pd.DataFrame) -> list[str]:
    """The measured numeric columns, in the table's order."""
    return [c for c in frame.columns if c not in NOT_METRICS
            and pd.api.types.is_numeric_dtype(frame[c])
            and not pd.api.types.is_bool_dtype(frame[c])]


def summarise(frame: pd.DataFrame, sweep_axes: list[str], point_order: list[str],
              thresholds: dict[str, Threshold]) -> list[PointSummary]:
    """One PointSummary per point of frame (points.parquet), in point_order (the scenario's
    sweep order; points it does not list come last)."""
    valid = verdict.valid(frame)
    stored = pd.Series(verdict.verdicts(frame), index=frame.index, dtype=object)
    metrics = [m for m in metric_columns(frame) if m not in sweep_axes]
    rank = {point_id: i for i, point_id in enumerate(point_order)}
    summaries = []
    for point_id, group in frame.groupby("point_id", sort=False):
        kept = group[valid[group.index]]
        measured = kept if len(kept) else group
        medians = {m: _number(measured[m].median()) for m in metrics}
        reasons = [Reason(int(repetition), list(stored[i].codes),
                          stored[i].reason or "no reason recorded")
                   for i, repetition in group.loc[~valid[group.index], "repetition"].items()]
        checks = [_check(metric, bound, medians.get(metric) if len(kept) else None, len(kept))
                  for metric, bound in thresholds.items()]
        summaries.append(PointSummary(
            str(point_id), {a: _plain(group[a].iloc[0]) for a in sweep_axes if a in group},
            len(kept), len(group), medians, not len(kept),
            sorted(reasons, key=lambda r: r.repetition), checks))
    return sorted(summaries, key=lambda s: rank.get(s.point_id, math.inf))


def _check(metric: str, threshold: Threshold, value: float | None, valid: int) -> ThresholdCheck:
    if not valid:
        return ThresholdCheck(metric, str(threshold), None, None)
    # A metric the run did not measure cannot show the bound was kept: crossed.
    return ThresholdCheck(metric, str(threshold), value,
                          value is not None and threshold.holds(value))


def _plain(value: Any) -> Any:
    """A parameter as JSON holds it (numpy scalars to Python ones, a missing one null: JSON
    has no NaN)."""
    if not isinstance(value, list | dict) and pd.isna(value):
        return None
    return value.item() if hasattr(value, "item") else value


def thresholds_crossed(summaries: list[PointSummary]) -> list[tuple[PointSummary,
                                                                     ThresholdCheck]]:
    return [(s, c) for s in summaries for c in s.thresholds if c.passed is False]


@dataclass(frozen=True)
class Gate:
    """A finished run's exit status and what decided it."""

    status: int
    crossed: list[tuple[PointSummary, ThresholdCheck]]
    unjudged: list[PointSummary]  # points with thresholds and no valid repetition
    invalid: int  # point × repetitions invalid
    busy: list[str]  # when every invalid one was only others' work: the rules, else empty

    def too_busy(self) -> str | None:
        """Where the run has no verdict (3, or 1) only for others' work on the measured CPUs,
        the line that says so: how many, and by what; else None."""
        if self.status not in (EXIT_UNJUDGED, EXIT_INVALID) or not self.busy:
            return None
        return (f"the machine was too busy to judge: {self.invalid} point × repetition(s) "
                f"invalid, each only for others' work on the measured CPUs "
                f"({'; '.join(self.busy)}); run again when it is quieter, or wait for it "
                f"(--quiet-wait S)")


def others_only(summaries: list[PointSummary]) -> list[str]:
    """The interference rules the invalid repetitions broke, when they broke no other
    (summary.json's machine_too_busy); empty when none is invalid or one broke another."""
    rules: dict[str, None] = {}
    for reason in (r for s in summaries for r in s.reasons):
        try:
            codes = [Code(code) for code in reason.codes]
        except ValueError:  # a code this version does not know
            return []
        if not codes or any(code.kind is not Kind.INTERFERENCE for code in codes):
            return []
        rules.update(dict.fromkeys(code.rule for code in codes))
    return list(rules)


def gate(summaries: list[PointSummary], allow_invalid: bool) -> Gate:
    """The exit status of a finished run (or of several, `run --kernel`): a crossed threshold
    (99), then thresholds not judged (3: no verdict, whatever --allow-invalid says: a gate
    that judged nothing must not pass), then invalid repetitions (1, unless allowed), else 0;
    and whether only others' work on the measured CPUs left it without a verdict."""
    crossed = thresholds_crossed(summaries)
    unjudged = [s for s in summaries if any(c.passed is None for c in s.thresholds)]
    invalid = sum(s.total - s.valid for s in summaries)
    if crossed:
        status = EXIT_THRESHOLDS
    elif unjudged:
        status = EXIT_UNJUDGED
    elif invalid and not allow_invalid:
        status = EXIT_INVALID
    else:
        status = 0
    return Gate(status, crossed, unjudged, invalid, others_only(summaries))


def document(run: dict[str, Any], summaries: list[PointSummary],
             exit_status: int) -> dict[str, Any]:
    """summary.json: plain JSON (no pandas needed to read it), docs/results-format.md."""
    return {
        "format": SUMMARY_FORMAT,
        "wanbench_version": harness.__version__,
        "run_id": run.get("run_id"),
        "scenario": run.get("scenario_name"),
        "sweep_axes": run.get("sweep_axes", []),
        "exit_status": exit_status,
        "valid": sum(s.valid for s in summaries),
        "total": sum(s.total for s in summaries),
        "thresholds_crossed": len(thresholds_crossed(summaries)),
        "machine_too_busy": bool(others_only(summaries)),
        "points": [asdict(s) for s in summaries],
    }  # every number finite or null: _number and _plain


def reason_lines(summaries: list[PointSummary], limit: int = 10) -> list[str]:
    """`dispatch=select cold=0 rep 1: reason` for the first `limit` invalid repetitions."""
    lines = [f"{point_label(s.parameters)} rep {r.repetition}: {r.text}"
             for s in summaries for r in s.reasons]
    more = len(lines) - limit
    return lines[:limit] + ([f"… and {more} more (points.parquet, column invalid_reason)"]
                            if more > 0 else [])
