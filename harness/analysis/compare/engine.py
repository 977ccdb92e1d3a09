"""Compare one candidate run with the base run over the whole grid: rows, verdicts, summary.

Per metric: the per-second samples of every point and both runs give one pooled lag-1
autocorrelation; each run gets one ratio kappa (stats.py); then every common
point is tested (Welch on log values), Benjamini-Hochberg runs over all rows of the
candidate, and each row gets a verdict:

  regression / improvement  q < alpha and |change| >= min_effect, in the worse/better direction
  ~                         otherwise, if a regression of `detect` would have been detected
                            (power POWER at alpha / m, the level a lone change must reach)
  inconclusive              otherwise: fewer than 2 repetitions on a side (no test can reach
                            significance), or the smallest detectable regression exceeds
                            `detect`; the row says how many repetitions (or how much longer
                            a window) would make it conclusive
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats as sps

from harness.analysis.compare import samples
from harness.analysis.compare.metrics import DEFAULT_METRICS, Metric, UnknownMetric, metric
from harness.analysis.compare.stats import (
    POWER,
    RepVariance,
    Side,
    detectable,
    lag1_autocorrelation,
    repetition_variance,
    repetitions_needed,
    run_ratio,
    seconds_noise,
    welch,
    window_factor_needed,
)
from harness.results.format import PARAMETER_COLUMNS

REGRESSION, IMPROVEMENT, UNCHANGED, INCONCLUSIVE = ("regression", "improvement", "~",
                                                   "inconclusive")


class Incomparable(ValueError):
    """The runs cannot be compared (no common points, no such metric ...)."""


@dataclass(frozen=True)
class Options:
    metrics: tuple[str, ...] | None = None  # None: DEFAULT_METRICS measured on both sides
    alpha: float = 0.05  # false discovery rate over the grid
    min_effect: float = 0.02  # smaller relative changes are never a regression
    detect: float = 0.05  # the regression `~` promises would have been seen
    level: float = 0.95  # confidence level of the change's interval
    detect_for: tuple[tuple[str, float], ...] = ()  # per-metric `detect` overrides

    def detect_of(self, metric_name: str) -> float:
        return dict(self.detect_for).get(metric_name, self.detect)


@dataclass
class Comparison:
    """One candidate against the base: one row per point x metric."""

    rows: pd.DataFrame
    base_label: str
    cand_label: str
    options: Options
    tests: int  # rows that could be tested (the m of the correction)
    warnings: list[str] = field(default_factory=list)

    def count(self, verdict: str) -> int:
        return int((self.rows["verdict"] == verdict).sum())

    @property
    def verdict(self) -> str:
        if self.count(REGRESSION):
            return REGRESSION
        if self.count(INCONCLUSIVE):
            return INCONCLUSIVE
        return "no regression"


def benjamini_hochberg(p_values: np.ndarray) -> np.ndarray:
    """BH-adjusted q values; NaN p values (rows not tested) stay NaN."""
    q = np.full(len(p_values), np.nan)
    tested = np.flatnonzero(~np.isnan(p_values))
    if tested.size:
        q[tested] = sps.false_discovery_control(p_values[tested], method="bh")
    return q


def choose_metrics(base: samples.Run, cand: samples.Run, options: Options,
                   warnings: list[str]) -> list[Metric]:
    """The metrics to compare, with a possible --detect target each."""
    chosen = _metrics(base, cand, options, warnings)
    for m in chosen:
        if m.higher_is_better and options.detect_of(m.name) >= 1:
            raise Incomparable(f"--detect {options.detect_of(m.name):g} for {m.name}: a drop "
                               "of 100 % or more is not a size; give a fraction below 1")
    return chosen


def _metrics(base: samples.Run, cand: samples.Run, options: Options,
             warnings: list[str]) -> list[Metric]:
    """Explicit metrics must exist in both runs; default ones are kept where measured."""
    estimated = {base.cycles_estimated(), cand.cycles_estimated()}
    cycles_mixed = len(estimated) > 1 or None in estimated
    if options.metrics is not None:
        chosen = [metric(name) for name in options.metrics]
        for m in chosen:
            for run, role in ((base, "base"), (cand, "candidate")):
                if m.name not in run.points.columns:
                    raise Incomparable(f"metric {m.name}: no such column in the {role} run "
                                       f"{run.path}; pick a metric both runs recorded")
        if cycles_mixed and any(m.estimated_cycles for m in chosen):
            raise Incomparable("cycles_per_packet: counted by hardware on one side, estimated "
                               "from CPU time on the other; compare runs measured alike")
        return chosen
    chosen = [metric(name) for name in DEFAULT_METRICS
              if samples.measured(base, name) and samples.measured(cand, name)]
    if cycles_mixed and any(m.estimated_cycles for m in chosen):
        chosen = [m for m in chosen if not m.estimated_cycles]
        warnings.append("cycles_per_packet left out: counted by hardware on one side, "
                        "estimated from CPU time on the other")
    elif any(m.estimated_cycles for m in chosen) and True in estimated:
        warnings.append("cycles_per_packet is estimated (CPU time x TSC frequency, no hardware "
                        "counters): it moves with server CPU, not with cycles")
    if not chosen:
        raise Incomparable("no default metric was measured in both runs; name one with --metric")
    return chosen


def _sides(metric_: Metric, base: samples.Run, cand: samples.Run, common: list[str],
           values: tuple[dict[str, samples.Repetitions], dict[str, samples.Repetitions]],
           ) -> list[tuple[Side, Side, bool]]:
    """Per common point: (base side, candidate side, on log scale)."""
    use_seconds = bool(metric_.numerator) and (
        not metric_.estimated_cycles
        or (base.cycles_estimated() is True and cand.cycles_estimated() is True))
    series = ((samples.per_second(base, metric_), samples.per_second(cand, metric_))
              if use_seconds else ({}, {}))
    rho = lag1_autocorrelation([s for side in series for s in side.values()])
    floors = (samples.histogram_floors(base, metric_), samples.histogram_floors(cand, metric_))
    out = []
    for pid in common:
        reps = (values[0][pid], values[1][pid])
        # Log scale (relative effects) needs positive values; else differences, linearly.
        log = bool(np.all(reps[0].values > 0) and np.all(reps[1].values > 0))
        pair = []
        for side in (0, 1):
            if not log:
                pair.append(Side(reps[side].values))
                continue
            own = [series[side].get((pid, r)) for r in reps[side].ids]
            seconds = None
            if rho is not None and all(s is not None for s in own):
                seconds = seconds_noise(own, rho)
            pair.append(Side(np.log(reps[side].values), seconds, floors[side].get(pid, 0.0)))
        out.append((pair[0], pair[1], log))
    return out


def _relative(diff: float, log: bool, base_mean: float) -> float:
    if log:
        return math.expm1(diff)
    return diff / abs(base_mean) if base_mean != 0 else math.nan


def _regression_size(delta: float, m: Metric, log: bool, base_mean: float) -> float:
    """A test-scale difference `delta` >= 0 as the relative regression it stands for."""
    if delta == 0.0:
        return 0.0
    if log:
        return -math.expm1(-delta) if m.higher_is_better else math.expm1(delta)
    return delta / abs(base_mean) if base_mean != 0 else math.nan


def _target(m: Metric, log: bool, base_mean: float, detect: float) -> float:
    """The test-scale difference of a regression of `detect` (relative)."""
    if log:
        return -math.log1p(-detect) if m.higher_is_better else math.log1p(detect)
    return detect * abs(base_mean)


@dataclass
class _Row:
    point_id: str
    metric: str
    log: bool
    base: Side
    cand: Side
    var_b: RepVariance | None
    var_c: RepVariance | None


def _metric_rows(m: Metric, base: samples.Run, cand: samples.Run) -> list[_Row]:
    values = (samples.repetition_values(base, m.name), samples.repetition_values(cand, m.name))
    common = sorted(values[0].keys() & values[1].keys())
    sides = _sides(m, base, cand, common, values)
    ratio_b = run_ratio([b for b, _, log in sides if log])
    ratio_c = run_ratio([c for _, c, log in sides if log])
    return [_Row(pid, m.name, log, b, c,
                 repetition_variance(b, ratio_b if log else None),
                 repetition_variance(c, ratio_c if log else None))
            for pid, (b, c, log) in zip(common, sides, strict=True)]


def _centre(side: Side, log: bool) -> float:
    """Geometric mean on the log scale, arithmetic mean otherwise."""
    centre = float(np.mean(side.values))
    return math.exp(centre) if log else centre


def _test_rows(rows: list[_Row], options: Options) -> pd.DataFrame:
    records = []
    for row in rows:
        record = {
            "point_id": row.point_id, "metric": row.metric,
            "n_base": row.base.n, "n_cand": row.cand.n,
            "base": _centre(row.base, row.log), "cand": _centre(row.cand, row.log),
            "scale": "log" if row.log else "linear",
            "noise_base": row.var_b.source if row.var_b else None,
            "noise_cand": row.var_c.source if row.var_c else None,
        }
        if row.var_b is not None and row.var_c is not None:
            test = welch(row.base, row.var_b, row.cand, row.var_c, options.level)
            base_mean = float(np.mean(row.base.values))
            record.update(
                change=_relative(test.diff, row.log, base_mean),
                ci_low=_relative(test.ci_low, row.log, base_mean),
                ci_high=_relative(test.ci_high, row.log, base_mean),
                p=test.p, df=test.df, se=test.se,
            )
        records.append(record)
    columns = ["change", "ci_low", "ci_high", "p", "df", "se"]
    frame = pd.DataFrame.from_records(records)
    return frame.reindex(columns=[*frame.columns, *(c for c in columns if c not in frame)])


@dataclass(frozen=True)
class _Judgement:
    verdict: str
    detectable: float = math.nan  # smallest regression detected with POWER (relative)
    repetitions_needed: float = math.nan  # per side, to detect `detect`
    window_factor_needed: float = math.nan  # times longer, with today's repetitions
    reason: str = ""


def _judge_row(row: _Row, record: pd.Series, options: Options, alpha_one: float) -> _Judgement:
    if row.var_b is None or row.var_c is None:
        fewest = min(row.base.n, row.cand.n)
        return _Judgement(INCONCLUSIVE, repetitions_needed=2, reason=(
            f"{fewest} repetition(s) on a side: no test can reach significance without at "
            "least 2 per side (run-to-run noise is unseen)"))
    m = metric(row.metric)
    base_mean = float(np.mean(row.base.values))
    mde = _regression_size(detectable(record["se"], record["df"], alpha_one), m, row.log,
                           base_mean)
    change = float(record["change"])
    # A base of 0 (linear scale) has no relative change: any difference is large enough.
    size_ok = (abs(change) >= options.min_effect if not math.isnan(change)
               else record["cand"] != record["base"])
    if record["q"] < options.alpha and size_ok:
        worse = (record["cand"] - record["base"]) * m.sign < 0
        return _Judgement(REGRESSION if worse else IMPROVEMENT, mde)
    detect = options.detect_of(m.name)
    if math.isnan(mde) or mde <= detect:  # NaN: a base of 0 has no relative size
        return _Judgement(UNCHANGED, mde)
    target = _target(m, row.log, base_mean, detect)
    reps = repetitions_needed(row.var_b, row.var_c, target, alpha_one)
    factor = window_factor_needed(row.var_b, row.var_c, target, alpha_one)
    return _Judgement(
        INCONCLUSIVE, mde, math.nan if reps is None else reps,
        math.nan if factor is None else factor,
        f"could miss a regression of {detect * 100:g} %: the smallest this comparison detects "
        f"is {mde * 100:.1f} %")


def _judge(frame: pd.DataFrame, rows: list[_Row], options: Options) -> pd.DataFrame:
    frame["q"] = benjamini_hochberg(frame["p"].to_numpy(dtype=float))
    alpha_one = options.alpha / max(int(frame["p"].notna().sum()), 1)  # BH's lone-change level
    judgements = [_judge_row(row, frame.iloc[i], options, alpha_one)
                  for i, row in enumerate(rows)]
    for name in ("detectable", "verdict", "repetitions_needed", "window_factor_needed",
                 "reason"):
        frame[name] = [getattr(j, name) for j in judgements]
    return frame


def point_labels(points: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """point_id -> readable label, and a sort key following the parameter values."""
    columns = [c for c in columns if c in points.columns]
    first = points.drop_duplicates("point_id").sort_values([*columns, "point_id"])
    labels = pd.Series("", index=first.index)
    for column in columns:
        text = first[column].map(lambda v: f"{v:g}" if isinstance(v, float) else str(v))
        labels = labels + ("" if column == columns[0] else ", ") + f"{column}=" + text
    return pd.DataFrame({"point_id": first["point_id"].astype(str),
                         "point": labels if columns else first["point_id"].astype(str),
                         "order": range(len(first))})


def compare(base: samples.Run, cand: samples.Run, options: Options, base_label: str,
            cand_label: str) -> Comparison:
    """Compare two loaded runs over their common points."""
    warnings: list[str] = []
    try:
        metrics_ = choose_metrics(base, cand, options, warnings)
    except UnknownMetric as exc:
        raise Incomparable(str(exc)) from None
    rows = [row for m in metrics_ for row in _metric_rows(m, base, cand)]
    if not rows:
        raise Incomparable(
            f"no point has values for {', '.join(m.name for m in metrics_)} in both runs "
            f"({base.path} and {cand.path}); compare runs of the same sweep, or pick another "
            "--metric")
    frame = _judge(_test_rows(rows, options), rows, options)
    for run, role in ((base, "base"), (cand, "candidate")):
        if run.invalid:
            warnings.append(f"{role}: {run.invalid} invalid point record(s) left out")
    only = set(base.points["point_id"]) ^ set(cand.points["point_id"])
    if only:
        warnings.append(f"{len(only)} point(s) present in only one run are not compared")
    sweep = base.manifest.get("sweep_axes")
    if sweep is None:
        sweep = [c for c in PARAMETER_COLUMNS
                 if c in base.points and base.points[c].nunique() > 1]
    labels = point_labels(base.points, list(sweep))
    frame = frame.merge(labels, on="point_id", how="left")
    frame["point"] = frame["point"].fillna(frame["point_id"])
    metric_order = {m.name: i for i, m in enumerate(metrics_)}
    frame["metric_order"] = frame["metric"].map(metric_order)
    frame = frame.sort_values(["order", "metric_order"], kind="stable")
    frame = frame.drop(columns=["order", "metric_order"]).reset_index(drop=True)
    frame.insert(0, "point", frame.pop("point"))
    return Comparison(frame, base_label, cand_label, options, int(frame["p"].notna().sum()),
                      warnings)


__all__ = ["IMPROVEMENT", "INCONCLUSIVE", "POWER", "REGRESSION", "UNCHANGED", "Comparison",
           "Incomparable", "Options", "benjamini_hochberg", "compare", "point_labels"]
