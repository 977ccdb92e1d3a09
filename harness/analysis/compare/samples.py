"""The runs of one side of a comparison as compare needs them: per point and run, the
repetitions that enter the verdict, those that are invalid and why, and histogram floors.

Values come from points.parquet (the numbers every other report shows). A side is one or more
runs of one kernel; a folder given for a side holds its runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from harness.analysis.compare.metrics import Metric
from harness.analysis.compare.stats import RunSide, repetition_floor, run_value
from harness.analysis.derive import add_derived, with_verdict
from harness.analysis.prepare import rules_named
from harness.results.format import PARAMETER_COLUMNS
from harness.results.runset import read_runs
from harness.scenario import recorded

ONE_SIGMA = stats.norm.cdf([-1.0, 1.0])  # the order-statistic ranks of a +-1 sd interval


class NotARun(ValueError):
    """A path that holds no readable run."""


@dataclass
class Run:
    """One run directory, loaded."""

    path: Path
    manifest: dict
    points: pd.DataFrame  # every repetition, valid or not (`valid` a plain bool), derived columns
    histograms: pd.DataFrame

    @property
    def run_id(self) -> str:
        return str(self.manifest["run_id"])

    @property
    def kernel(self) -> str:
        return str((self.manifest.get("kernel") or {}).get("release") or "?")

    @property
    def scenario(self) -> dict:
        return self.manifest.get("scenario") or {}

    @property
    def duration_s(self) -> float | None:
        value = self.scenario.get("duration_s")
        recorded = self.points.get("duration_s")
        if value is None and recorded is not None and recorded.notna().any():
            value = float(recorded.median())
        return float(value) if value is not None else None

    @property
    def repetitions(self) -> int:
        return int(self.manifest.get("repetitions") or self.points["repetition"].nunique())

    @cached_property
    def by_point(self) -> pd.DataFrame:
        """The points' rows in point and repetition order: sorted once, read per metric."""
        return self.points.sort_values(["point_id", "repetition"], kind="stable")

    def cycles_estimated(self) -> bool | None:
        """True/False when every/no row estimated cycles; None when mixed or unknown."""
        if "cycles_estimated" not in self.points or self.points.empty:
            return None
        flags = self.points["cycles_estimated"].astype("boolean").dropna()
        if flags.empty:
            return None
        return bool(flags.all()) if flags.all() or not flags.any() else None


def load_runs(path: Path, role: str) -> list[Run]:
    """The runs at `path` (a run directory or a folder of runs), oldest first."""
    if not path.exists():
        raise NotARun(f"{role} {path}: no such directory; give a run directory "
                      "(results/<scenario>/<run-id>/) or a folder of runs")
    runs = read_runs([path], recorded)
    points = add_derived(with_verdict(runs.points))
    loaded = [Run(Path(row.path), runs.raw_manifests[row.run_id],
                  points[points["run_id"] == row.run_id],
                  runs.histograms[runs.histograms["run_id"] == row.run_id]
                  if not runs.histograms.empty else runs.histograms)
              for row in runs.manifests.sort_values("created_at").itertuples()]
    return loaded


def measured(runs: list[Run], metric: str) -> bool:
    return any(metric in run.points.columns and run.points[metric].notna().any()
               for run in runs)


@dataclass(frozen=True)
class PointRun:
    """One run's repetitions of one point, for one metric."""

    run_id: str
    values: np.ndarray  # the repetitions that enter the verdict (valid ones, or all if allowed)
    shown: np.ndarray  # what stands for the point: its valid repetitions, else its invalid ones
    repetitions: int  # how many repetitions have a value
    invalid: tuple[str, ...]  # the rules that made repetitions invalid, one entry each
    floor: float = 0.0  # least relative variance of one repetition (histogram resolution)


def point_runs(runs: list[Run], metric: Metric, allow_invalid: bool
               ) -> dict[str, list[PointRun]]:
    """point_id -> one PointRun per run that has the point, in run order."""
    out: dict[str, list[PointRun]] = {}
    for run in runs:
        if metric.name not in run.points.columns:
            continue
        floors = histogram_floors(run, metric)
        rows = run.by_point
        value = pd.to_numeric(rows[metric.name], errors="coerce").to_numpy(dtype=float)
        has = ~np.isnan(value)
        if not has.any():
            continue
        pids = rows["point_id"].astype(str).to_numpy()[has]
        columns = {"value": value[has], "valid": rows["valid"].to_numpy()[has],
                   "reason": (rows["invalid_codes"].to_numpy() if "invalid_codes" in rows
                              else np.full(len(rows), None, dtype=object))[has]}
        # consecutive rows of one point (a groupby building a frame per point is 10x slower)
        starts = np.flatnonzero(np.r_[True, pids[1:] != pids[:-1]])
        for pid, values, valid, reasons in zip(
                pids[starts], *(np.split(columns[c], starts[1:])
                                for c in ("value", "valid", "reason")), strict=True):
            values, valid = values.astype(float), valid.astype(bool)
            out.setdefault(str(pid), []).append(PointRun(
                run.run_id, values if allow_invalid else values[valid],
                values[valid] if valid.any() else values, len(values),
                tuple(rules_named(codes) for codes in reasons[~valid]),
                floors.get(str(pid), 0.0)))
    return out


def scale_of(metric: Metric, runs: list[PointRun]) -> str:
    """How a row is compared: "points" (a CPU percentage: the difference in points), "log"
    (relative change, on log values), or "linear" (relative to the base's mean, for metrics
    that can be 0 or negative, e.g. an error count)."""
    if metric.points:
        return "points"
    values = np.concatenate([run.values for run in runs]) if runs else np.empty(0)
    return "log" if values.size and bool(np.all(values > 0)) else "linear"


def run_side(runs: list[PointRun], scale: str) -> RunSide | None:
    """The runs that enter the verdict as values on the row's scale; None when none does."""
    entering = [run for run in runs if run.values.size]
    if not entering:
        return None
    log = scale == "log"
    values = [np.log(run.values) if log else run.values for run in entering]
    floors = [repetition_floor(v, run.floor if log else 0.0)
              for v, run in zip(values, entering, strict=True)]
    return RunSide(np.array([run_value(v) for v in values]),
                   np.array([len(v) for v in values]), float(np.mean(floors)))


def point_labels(runs: list[Run]) -> pd.DataFrame:
    """point_id -> readable label ("dispatch=select, cold_conns=1000": the sweep's values), and
    a sort key following them."""
    points = pd.concat([run.points for run in runs], ignore_index=True)
    columns = runs[0].manifest.get("sweep_axes")
    if columns is None:
        columns = [c for c in PARAMETER_COLUMNS if c in points and points[c].nunique() > 1]
    columns = [c for c in columns if c in points.columns]
    first = points.drop_duplicates("point_id").sort_values([*columns, "point_id"])
    labels = pd.Series("", index=first.index)
    for column in columns:
        text = first[column].map(lambda v: f"{v:g}" if isinstance(v, float) else str(v))
        labels = labels + ("" if column == columns[0] else ", ") + f"{column}=" + text
    return pd.DataFrame({"point_id": first["point_id"].astype(str),
                         "point": labels if columns else first["point_id"].astype(str),
                         "order": range(len(first))})


def _histogram_floor(rows: pd.DataFrame, statistic: str | float) -> float | None:
    """Relative variance a repetition's latency statistic has at the very least.

    The histogram's bucket width limits its resolution (uniform: width^2 / 12), and even
    independent requests give a sampling error (the order-statistic interval of the quantile,
    or var/N for the mean). Requests within a window are not independent (queueing), so this
    is a floor under the repetition variance, never an estimate of it.
    """
    rows = rows.sort_values("lo_us")
    counts = rows["count"].to_numpy(dtype=float)
    total = counts.sum()
    if total <= 0:
        return None
    lo, hi = rows["lo_us"].to_numpy(dtype=float), rows["hi_us"].to_numpy(dtype=float)
    mids = (lo + hi) / 2.0
    if statistic == "mean":
        mean = float(counts @ mids / total)
        if mean <= 0:
            return None
        spread = float(counts @ (mids - mean) ** 2 / total)
        return spread / total / mean**2
    cumulative = np.cumsum(counts)
    rank = min(np.searchsorted(cumulative, float(statistic) * total), len(mids) - 1)
    value = mids[rank]
    if value <= 0:
        return None
    quantisation = ((hi[rank] - lo[rank]) / value) ** 2 / 12.0
    ranks = stats.binom.ppf(ONE_SIGMA, int(total), float(statistic))
    low, high = (min(np.searchsorted(cumulative, r), len(mids) - 1) for r in ranks)
    sampling = ((mids[high] - mids[low]) / 2.0 / value) ** 2
    return float(quantisation + sampling)


def histogram_floors(run: Run, metric: Metric) -> dict[str, float]:
    """point_id -> mean floor over its repetitions (log scale), for latency metrics."""
    if metric.histogram is None or run.histograms.empty:
        return {}
    kind, statistic = metric.histogram
    hist = run.histograms[run.histograms["kind"] == kind]
    floors: dict[str, list[float]] = {}
    for (pid, _rep), rows in hist.groupby(["point_id", "repetition"], sort=False):
        floor = _histogram_floor(rows, statistic)
        if floor is not None:
            floors.setdefault(str(pid), []).append(floor)
    return {pid: float(np.mean(values)) for pid, values in floors.items()}


__all__ = ["NotARun", "PointRun", "Run", "histogram_floors", "load_runs", "measured",
           "point_labels", "point_runs", "run_side", "scale_of"]
