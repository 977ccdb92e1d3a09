"""One run as compare needs it: repetition values, per-second series, histogram floors.

Repetition values come from points.parquet (the numbers every other report shows). The
per-second series only describe how noisy a repetition's value is; they are cut to the
measured window where their clock includes the warm-up (the generator's timeline).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from harness.analysis.compare.metrics import Metric
from harness.analysis.derive import add_derived, valid_points
from harness.results.runset import read_runs

# A second belongs to the window if it lies inside it, give or take the generator's start-up.
WINDOW_SLACK_S = 0.05
ONE_SIGMA = stats.norm.cdf([-1.0, 1.0])  # the order-statistic ranks of a +-1 sd interval


class NotARun(ValueError):
    """A path that is not exactly one readable run directory."""


@dataclass
class Run:
    """One run directory, loaded."""

    path: Path
    manifest: dict
    points: pd.DataFrame  # valid rows only, derived columns added
    timeseries: pd.DataFrame
    histograms: pd.DataFrame
    invalid: int  # point records left out because the runner marked them invalid
    warnings: list[str] = field(default_factory=list)

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
    def warmup_s(self) -> float:
        return float(self.scenario.get("warmup_s") or 0.0)

    @property
    def duration_s(self) -> float | None:
        value = self.scenario.get("duration_s")
        recorded = self.points.get("duration_s")
        if value is None and recorded is not None and recorded.notna().any():
            value = float(recorded.median())
        return float(value) if value is not None else None

    def cycles_estimated(self) -> bool | None:
        """True/False when every/no row estimated cycles; None when mixed or unknown."""
        if "cycles_estimated" not in self.points or self.points.empty:
            return None
        flags = self.points["cycles_estimated"].astype("boolean").dropna()
        if flags.empty:
            return None
        return bool(flags.all()) if flags.all() or not flags.any() else None


def load_run(path: Path, role: str) -> Run:
    """Load one run directory; NotARun/ResultsFormatError name the problem and the fix."""
    if not path.exists():
        raise NotARun(f"{role} {path}: no such directory; give a run directory "
                      "(results/<scenario>/<run-id>/)")
    runs = read_runs([path])
    if len(runs.manifests) != 1:
        raise NotARun(f"{role} {path}: holds {len(runs.manifests)} runs; give one run directory "
                      "(results/<scenario>/<run-id>/), not a folder of runs")
    manifest = runs.raw_manifests[str(runs.manifests["run_id"].iloc[0])]
    valid = valid_points(runs.points)
    return Run(path, manifest, add_derived(valid), runs.timeseries, runs.histograms,
               invalid=len(runs.points) - len(valid))


@dataclass(frozen=True)
class Repetitions:
    """One point's valid repetitions with a value for the metric."""

    ids: tuple[int, ...]  # repetition numbers
    values: np.ndarray


def repetition_values(run: Run, metric: str) -> dict[str, Repetitions]:
    """point_id -> the metric's value per valid repetition (NaN dropped), in repetition order."""
    if metric not in run.points.columns:
        return {}
    frame = run.points[["point_id", "repetition", metric]].copy()
    frame[metric] = pd.to_numeric(frame[metric], errors="coerce")
    frame = frame.dropna(subset=[metric]).sort_values(["point_id", "repetition"])
    pids, values = _split(frame, ["point_id"], metric)
    _, reps = _split(frame, ["point_id"], "repetition")
    return {pid: Repetitions(tuple(int(r) for r in ids), vals)
            for pid, ids, vals in zip(pids, reps, values, strict=True)}


def measured(run: Run, metric: str) -> bool:
    return metric in run.points.columns and run.points[metric].notna().any()


def _series_table(run: Run, pairs: tuple[tuple[str, str], ...]) -> pd.DataFrame | None:
    """(point_id, repetition, t_s) -> summed value of the given (source, metric) pairs."""
    if not pairs or run.timeseries.empty:
        return None
    ts = run.timeseries
    chosen = pd.Series(False, index=ts.index)
    for source, name in pairs:
        chosen |= (ts["source"] == source) & (ts["metric"] == name)
    rows = ts.loc[chosen, ["point_id", "repetition", "t_s", "value"]]
    if rows.empty:
        return None
    if len(pairs) == 1:
        return rows
    keys = ["point_id", "repetition", "t_s"]
    summed = rows.groupby(keys, sort=False)["value"].agg(["sum", "count"]).reset_index()
    # A second counts only where every series of the sum was sampled.
    summed = summed[summed["count"] == len(pairs)]
    return summed[keys].assign(value=summed["sum"]) if not summed.empty else None


def per_second(run: Run, metric: Metric) -> dict[tuple[str, int], np.ndarray]:
    """(point_id, repetition) -> the metric's per-second samples inside the measured window."""
    numerator = _series_table(run, metric.numerator)
    if numerator is None:
        return {}
    if metric.denominator:
        denominator = _series_table(run, metric.denominator)
        if denominator is None:
            return {}
        keys = ["point_id", "repetition", "t_s"]
        numerator = numerator.merge(denominator, on=keys, suffixes=("", "_den"))
        numerator["value"] = numerator["value"] / numerator["value_den"].where(
            numerator["value_den"] > 0)
    if metric.generator_clock:
        end = run.warmup_s + (run.duration_s or math.inf)
        t = numerator["t_s"]
        numerator = numerator[(t >= run.warmup_s - WINDOW_SLACK_S)
                              & (t + 1.0 <= end + WINDOW_SLACK_S)]
    numerator = numerator.dropna(subset=["value"]).sort_values(["point_id", "repetition", "t_s"])
    return dict(zip(*_split(numerator, ["point_id", "repetition"], "value"), strict=True))


def _split(frame: pd.DataFrame, keys: list[str], column: str) -> tuple[list, list[np.ndarray]]:
    """Consecutive runs of equal keys in a sorted frame -> (key tuples, value arrays).

    groupby builds a frame per group; with a few thousand small groups this is 10x faster.
    """
    if frame.empty:
        return [], []
    key_columns = [frame[k].to_numpy() for k in keys]
    change = np.zeros(len(frame), dtype=bool)
    change[0] = True
    for values in key_columns:
        change[1:] |= values[1:] != values[:-1]
    starts = np.flatnonzero(change)
    labels = [tuple(_plain_key(values[i]) for values in key_columns) for i in starts]
    return ([label if len(label) > 1 else label[0] for label in labels],
            np.split(frame[column].to_numpy(dtype=float), starts[1:]))


def _plain_key(value: object) -> object:
    return int(value) if isinstance(value, (int, np.integer)) else str(value)


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


__all__ = ["NotARun", "Repetitions", "Run", "histogram_floors", "load_run", "measured",
           "per_second", "repetition_values"]
