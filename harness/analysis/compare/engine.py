"""Compare one candidate side with the base side over the whole grid: rows, verdicts, summary.

A side is one or more runs of one kernel, and the run is the unit (stats.py): each run's value
at a point is the mean of its repetitions. Every point either side has is a row per metric;
a row is tested (Student's t on the runs' values, with the run-to-run variance from the sides'
own runs and from a noise record), Benjamini-Hochberg runs over all tested rows of the
candidate, and each row gets a verdict:

  regression / improvement  q < alpha and |change| >= min effect, in the worse/better direction
  ~                         otherwise, if a regression of `detect` would have been detected
                            (power POWER at alpha / m, the level a lone change must reach)
  inconclusive              otherwise: nothing is known of what a second run moves (one run
                            per side and no noise record), or the smallest detectable
                            regression exceeds `detect`; the row says how many runs per side
                            would decide it
  invalid                   a side has no valid repetition at the point: shown with its values
                            and reasons, not judged (--allow-invalid judges them)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats as sps

from harness.analysis.compare import samples
from harness.analysis.compare.metrics import (
    DEFAULT_METRICS,
    POINTS_DETECT,
    POINTS_MIN_EFFECT,
    Metric,
    UnknownMetric,
    metric,
)
from harness.analysis.compare.noise import NoiseRecord
from harness.analysis.compare.stats import (
    POWER,
    RunSide,
    RunVariance,
    detectable,
    run_variance,
    runs_needed,
    t_test,
)
from harness.analysis.numbers import percent

REGRESSION, IMPROVEMENT, UNCHANGED, INCONCLUSIVE, INVALID = (
    "regression", "improvement", "~", "inconclusive", "invalid")
MDE_SHOWN = 10.0  # a detectable regression above +1,000 % is shown as "> +1,000 %"


class Incomparable(ValueError):
    """The runs cannot be compared (no common points, no such metric ...)."""


@dataclass(frozen=True)
class Options:
    metrics: tuple[str, ...] | None = None  # None: DEFAULT_METRICS measured on both sides
    alpha: float = 0.05  # false discovery rate over the grid
    min_effect: float = 0.02  # smaller relative changes are never a regression
    detect: float = 0.05  # the relative regression `~` promises would have been seen
    level: float = 0.95  # confidence level of the change's interval
    detect_for: tuple[tuple[str, float], ...] = ()  # per-metric `detect` overrides
    min_effect_for: tuple[tuple[str, float], ...] = ()  # per-metric `min_effect` overrides
    allow_invalid: bool = False  # invalid repetitions enter the verdict too

    def detect_of(self, metric_name: str) -> float:
        """In the metric's terms: a fraction, or percentage points for CPU."""
        default = POINTS_DETECT if metric(metric_name).points else self.detect
        return dict(self.detect_for).get(metric_name, default)

    def min_effect_of(self, metric_name: str) -> float:
        default = POINTS_MIN_EFFECT if metric(metric_name).points else self.min_effect
        return dict(self.min_effect_for).get(metric_name, default)


@dataclass
class Side:
    """One side of a comparison: runs of one kernel."""

    runs: list[samples.Run]
    label: str = ""

    @property
    def first(self) -> samples.Run:
        return self.runs[0]

    @property
    def run_ids(self) -> list[str]:
        return [run.run_id for run in self.runs]

    @property
    def shape(self) -> str:
        """e.g. '3 runs x 2 repetitions x 3 s'."""
        reps = sorted({run.repetitions for run in self.runs})
        text = f"{len(self.runs)} run{'s' if len(self.runs) > 1 else ''} x "
        text += f"{'-'.join(map(str, (reps[0], reps[-1]) if len(reps) > 1 else reps))} "
        text += "repetition(s)"
        duration = self.first.duration_s
        return f"{text} x {duration:g} s" if duration else text


@dataclass
class Comparison:
    """One candidate side against the base side: one row per point x metric."""

    rows: pd.DataFrame
    base: Side
    cand: Side
    options: Options
    tests: int  # rows that could be tested (the m of the correction)
    noise: str | None = None  # the noise record used, described
    warnings: list[str] = field(default_factory=list)

    def count(self, verdict: str) -> int:
        return int((self.rows["verdict"] == verdict).sum())

    @property
    def verdict(self) -> str:
        if self.count(REGRESSION):
            return REGRESSION
        if self.count(INCONCLUSIVE) or self.count(INVALID):
            return INCONCLUSIVE
        return "no regression"


@dataclass(frozen=True)
class Overall:
    """One metric over the points both sides measured validly, as benchstat's geomean row:
    descriptive, not a test (the rows' verdicts are the test)."""

    metric: str
    points: int
    kind: str  # "geomean" (rates and times, every value > 0) or "mean" (CPU points, counts)
    scale: str  # how `change` reads: "log" (relative), "points", "linear" (relative)
    base: float
    cand: float
    change: float


def overall(comparison: Comparison) -> list[Overall]:
    """Per metric, the geometric mean of each side's values over the points where both sides
    have valid runs (the arithmetic mean for CPU points, or where a value is 0), and its
    change."""
    rows = comparison.rows[(comparison.rows["runs_base"] > 0)
                           & (comparison.rows["runs_cand"] > 0)]
    out = []
    for name, group in rows.groupby("metric", sort=False):
        base, cand = group["base"].to_numpy(float), group["cand"].to_numpy(float)
        points = metric(str(name)).points
        if not points and bool(np.all(base > 0)) and bool(np.all(cand > 0)):
            low, high = (math.exp(float(np.mean(np.log(v)))) for v in (base, cand))
            out.append(Overall(str(name), len(group), "geomean", "log", low, high,
                               high / low - 1.0))
            continue
        low, high = float(np.mean(base)), float(np.mean(cand))
        scale = "points" if points else "linear"
        out.append(Overall(str(name), len(group), "mean", scale, low, high,
                           _change(high - low, scale, low)))
    return out


def benjamini_hochberg(p_values: np.ndarray) -> np.ndarray:
    """BH-adjusted q values; NaN p values (rows not tested) stay NaN."""
    q = np.full(len(p_values), np.nan)
    tested = np.flatnonzero(~np.isnan(p_values))
    if tested.size:
        q[tested] = sps.false_discovery_control(p_values[tested], method="bh")
    return q


def _cycles_estimated(runs: list[samples.Run]) -> set[bool | None]:
    return {run.cycles_estimated() for run in runs}


def choose_metrics(base: Side, cand: Side, options: Options,
                   warnings: list[str]) -> list[Metric]:
    """Explicit metrics must exist on both sides; default ones are kept where measured."""
    estimated = _cycles_estimated(base.runs) | _cycles_estimated(cand.runs)
    cycles_mixed = len(estimated) > 1 or None in estimated
    if options.metrics is not None:
        chosen = [metric(name) for name in options.metrics]
        for m in chosen:
            for side, role in ((base, "base"), (cand, "candidate")):
                for run in side.runs:
                    if m.name not in run.points.columns:
                        raise Incomparable(f"metric {m.name}: no such column in the {role} run "
                                           f"{run.path}; pick a metric both runs recorded")
        if cycles_mixed and any(m.estimated_cycles for m in chosen):
            raise Incomparable("cycles_per_packet: counted by hardware in some runs, estimated "
                               "from CPU time in others; compare runs measured alike")
        chosen_detect = [m for m in chosen if m.higher_is_better and not m.points
                         and options.detect_of(m.name) >= 1]
        if chosen_detect:
            m = chosen_detect[0]
            raise Incomparable(f"--detect {options.detect_of(m.name):g} for {m.name}: a drop "
                               "of 100 % or more is not a size; give a fraction below 1")
        return chosen
    chosen = [metric(name) for name in DEFAULT_METRICS
              if samples.measured(base.runs, name) and samples.measured(cand.runs, name)]
    if cycles_mixed and any(m.estimated_cycles for m in chosen):
        chosen = [m for m in chosen if not m.estimated_cycles]
        warnings.append("cycles_per_packet left out: counted by hardware in some runs, "
                        "estimated from CPU time in others")
    elif any(m.estimated_cycles for m in chosen) and True in estimated:
        warnings.append("cycles_per_packet is estimated (CPU time x TSC frequency, no hardware "
                        "counters): it moves with server CPU, not with cycles")
    if not chosen:
        raise Incomparable("no default metric was measured in both runs; name one with --metric")
    return chosen


# -- one row --------------------------------------------------------------------------------


def _centre(values: np.ndarray, log: bool) -> float:
    """Geometric mean on the log scale, arithmetic mean otherwise."""
    return math.exp(float(np.mean(values))) if log else float(np.mean(values))


def _shown_centre(runs: list[samples.PointRun]) -> float:
    """What stands for a side not judged: its repetitions' values, valid or not."""
    values = np.concatenate([run.shown for run in runs])
    return _centre(np.log(values), True) if bool(np.all(values > 0)) else float(np.mean(values))


def _rules(runs: list[samples.PointRun]) -> list[str]:
    """The validity rules the side's invalid repetitions broke, each once."""
    return list(dict.fromkeys(rule for run in runs for reason in run.invalid
                              for rule in reason.split("; ")))


def _invalid_counts(base: list[samples.PointRun], cand: list[samples.PointRun],
                    allow_invalid: bool) -> str:
    """'base 2 of 2, candidate 1 of 2: left out' (empty when every repetition is valid)."""
    parts = []
    for role, runs in (("base", base), ("candidate", cand)):
        invalid = sum(len(run.invalid) for run in runs)
        if invalid:
            parts.append(f"{role} {invalid} of {sum(run.repetitions for run in runs)}")
    if not parts:
        return ""
    return f"{', '.join(parts)}: {'judged (--allow-invalid)' if allow_invalid else 'left out'}"


def _invalid_reasons(base: list[samples.PointRun], cand: list[samples.PointRun]) -> str:
    """'base: late sends; candidate: the generator fell behind' (empty when all valid)."""
    return "; ".join(f"{role}: {', '.join(rules)}" for role, rules in
                     (("base", _rules(base)), ("candidate", _rules(cand))) if rules)


def _change(diff: float, scale: str, base_centre: float) -> float:
    """A test-scale difference as the reported change: relative, or points for CPU."""
    if scale == "log":
        return math.expm1(diff)
    if scale == "points":
        return diff
    return diff / abs(base_centre) if base_centre != 0 else math.nan


def _regression_size(delta: float, m: Metric, scale: str, base_centre: float) -> float:
    """A test-scale difference `delta` >= 0 as the regression it stands for (relative, or
    points for CPU)."""
    if scale == "log":
        return -math.expm1(-delta) if m.higher_is_better else math.expm1(delta)
    return _change(delta, scale, base_centre)


def _target(m: Metric, scale: str, base_centre: float, detect: float) -> float:
    """The test-scale difference of a regression of `detect`."""
    if scale == "log":
        return -math.log1p(-detect) if m.higher_is_better else math.log1p(detect)
    return detect if scale == "points" else detect * abs(base_centre)


def regression_size(size: float, metric_name: str, scale: str) -> str:
    """A regression's size, signed in its direction (-5.0 % for a rate drop, +2.6 pp of CPU)."""
    if math.isnan(size):
        return "—"
    if scale == "points":
        return f"{size:+.1f} pp"
    if size > MDE_SHOWN:
        return f"> {percent(MDE_SHOWN)} %"  # beyond this, the exact figure means nothing
    return f"{percent(-size if metric(metric_name).higher_is_better else size)} %"


@dataclass
class _Row:
    point_id: str
    metric: Metric
    scale: str
    base: RunSide | None  # None: no run of the side enters the verdict at this point
    cand: RunSide | None
    variance: RunVariance | None
    record: dict  # what every row shows, tested or not
    judged_invalid: bool = False  # invalid repetitions entered (--allow-invalid)


def _row(pid: str, m: Metric, base: list[samples.PointRun], cand: list[samples.PointRun],
         noise: NoiseRecord | None, options: Options) -> _Row:
    scale = samples.scale_of(m, base + cand)
    side_b, side_c = samples.run_side(base, scale), samples.run_side(cand, scale)
    log = scale == "log"
    record = {
        "point_id": pid, "metric": m.name, "scale": scale,
        "runs_base": side_b.n if side_b else 0, "runs_cand": side_c.n if side_c else 0,
        "base": _centre(side_b.values, log) if side_b else _shown_centre(base),
        "cand": _centre(side_c.values, log) if side_c else _shown_centre(cand),
        "invalid": _invalid_counts(base, cand, options.allow_invalid),
        "invalid_reasons": _invalid_reasons(base, cand),
    }
    variance = None
    # A noise record measured valid repetitions: it says nothing of how far invalid ones
    # (interference, a generator that fell behind) move a run, so they do without it.
    judged_invalid = options.allow_invalid and any(run.invalid for run in base + cand)
    if side_b is not None and side_c is not None:
        known = noise.known(pid, m.name, scale) if noise and not judged_invalid else None
        variance = run_variance(side_b, side_c, known)
        record["noise"] = " + ".join(variance.sources) if variance else None
    return _Row(pid, m, scale, side_b, side_c, variance, record, judged_invalid)


def _test(row: _Row, options: Options) -> dict:
    base_centre = row.record["base"]
    if row.base is None or row.cand is None:
        # not judged: the change its values show, without an interval
        cand_centre = row.record["cand"]
        if row.scale == "log" and min(base_centre, cand_centre) > 0:
            return {"change": cand_centre / base_centre - 1.0}
        scale = "points" if row.scale == "points" else "linear"
        return {"change": _change(cand_centre - base_centre, scale, base_centre)}
    if row.variance is None:
        diff = float(np.mean(row.cand.values) - np.mean(row.base.values))
        return {"change": _change(diff, row.scale, base_centre)}
    test = t_test(row.base, row.cand, row.variance, options.level)
    return {"change": _change(test.diff, row.scale, base_centre),
            "ci_low": _change(test.ci_low, row.scale, base_centre),
            "ci_high": _change(test.ci_high, row.scale, base_centre),
            "p": test.p, "df": test.df, "se": test.se}


@dataclass(frozen=True)
class _Judgement:
    verdict: str
    detectable: float = math.nan  # smallest regression detected with POWER
    runs_needed: float = math.nan  # per side, to detect `detect`
    reason: str = ""


def _judge_row(row: _Row, record: pd.Series, options: Options, alpha_one: float) -> _Judgement:
    m = row.metric
    if row.base is None or row.cand is None:
        side = "base" if row.base is None else "candidate"
        return _Judgement(INVALID, reason=(
            f"no valid repetition on the {side} side: not judged (--allow-invalid judges the "
            "invalid ones)"))
    base_centre = float(record["base"])
    detect = options.detect_of(m.name)
    target = _target(m, row.scale, base_centre, detect)
    if row.variance is None:
        needed = runs_needed(row.base, row.cand, None, target, alpha_one)
        unknown = ("its invalid repetitions entered (--allow-invalid), and a noise record "
                   "knows valid ones only" if row.judged_invalid else
                   "no noise record for this point")
        return _Judgement(INCONCLUSIVE, runs_needed=math.nan if needed is None else needed,
                          reason=(f"one run per side and no run-to-run spread known ({unknown}):"
                                  " the difference could be what a second run of the same kernel"
                                  " moves"))
    mde = _regression_size(detectable(record["se"], record["df"], alpha_one), m, row.scale,
                           base_centre)
    change = float(record["change"])
    # A base of 0 (linear scale) has no relative change: any difference is large enough.
    size_ok = (abs(change) >= options.min_effect_of(m.name) if not math.isnan(change)
               else record["cand"] != record["base"])
    if record["q"] < options.alpha and size_ok:
        worse = (record["cand"] - record["base"]) * m.sign < 0
        return _Judgement(REGRESSION if worse else IMPROVEMENT, mde)
    if math.isnan(mde) or mde <= detect:  # NaN: a base of 0 has no relative size
        return _Judgement(UNCHANGED, mde)
    needed = runs_needed(row.base, row.cand, row.variance, target, alpha_one)
    return _Judgement(INCONCLUSIVE, mde, math.nan if needed is None else needed,
                      f"could miss a regression of {detect:g}{' pp' if m.points else ''}: the "
                      f"smallest this comparison detects is "
                      f"{regression_size(mde, m.name, row.scale)}")


def _judge(frame: pd.DataFrame, rows: list[_Row], options: Options) -> pd.DataFrame:
    frame["q"] = benjamini_hochberg(frame["p"].to_numpy(dtype=float))
    alpha_one = options.alpha / max(int(frame["p"].notna().sum()), 1)  # BH's lone-change level
    judgements = [_judge_row(row, frame.iloc[i], options, alpha_one)
                  for i, row in enumerate(rows)]
    for name in ("detectable", "verdict", "runs_needed", "reason"):
        frame[name] = [getattr(j, name) for j in judgements]
    frame["judged"] = frame["verdict"] != INVALID
    return frame


# -- the grid -------------------------------------------------------------------------------

RESULT_COLUMNS = ["change", "ci_low", "ci_high", "p", "df", "se", "noise"]


def _only_in(role: str, pids: set[str], labels: pd.Series) -> str:
    names = ", ".join(sorted(str(labels.get(pid, pid)) for pid in pids))
    return f"{len(pids)} point(s) only in the {role} run(s), not compared: {names}"


def compare(base: Side, cand: Side, options: Options,
            noise: NoiseRecord | None = None) -> Comparison:
    """Compare two sides over every point either has."""
    warnings: list[str] = []
    try:
        metrics_ = choose_metrics(base, cand, options, warnings)
    except UnknownMetric as exc:
        raise Incomparable(str(exc)) from None
    labels = samples.point_labels([*base.runs, *cand.runs])
    rows: list[_Row] = []
    present = (set(), set())
    for m in metrics_:
        per_point = (samples.point_runs(base.runs, m, options.allow_invalid),
                     samples.point_runs(cand.runs, m, options.allow_invalid))
        present[0].update(per_point[0])
        present[1].update(per_point[1])
        rows += [_row(pid, m, per_point[0][pid], per_point[1][pid], noise, options)
                 for pid in sorted(per_point[0].keys() & per_point[1].keys())]
    if not rows:
        raise Incomparable(
            f"no common points between base {base.first.path} and candidate "
            f"{cand.first.path} for {', '.join(m.name for m in metrics_)}; compare runs of "
            "the same sweep, or name a metric both measured with --metric")
    by_label = labels.set_index("point_id")["point"]
    for role, only in (("base", present[0] - present[1]), ("candidate", present[1] - present[0])):
        if only:
            warnings.append(_only_in(role, only, by_label))
    frame = pd.DataFrame.from_records([{**row.record, **_test(row, options)} for row in rows])
    frame = frame.reindex(columns=[*frame.columns,
                                   *(c for c in RESULT_COLUMNS if c not in frame)])
    frame = _judge(frame, rows, options)
    frame = frame.merge(labels, on="point_id", how="left")
    frame["point"] = frame["point"].fillna(frame["point_id"])
    metric_order = {m.name: i for i, m in enumerate(metrics_)}
    frame["metric_order"] = frame["metric"].map(metric_order)
    frame = frame.sort_values(["order", "metric_order"], kind="stable")
    frame = frame.drop(columns=["order", "metric_order"]).reset_index(drop=True)
    frame.insert(0, "point", frame.pop("point"))
    return Comparison(frame, base, cand, options, int(frame["p"].notna().sum()),
                      noise.describe() if noise else None, warnings)


__all__ = ["IMPROVEMENT", "INCONCLUSIVE", "INVALID", "POWER", "REGRESSION", "UNCHANGED",
           "Comparison", "Incomparable", "MDE_SHOWN", "Options", "Overall", "Side",
           "benjamini_hochberg", "compare", "overall", "regression_size"]
