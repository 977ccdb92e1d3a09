"""The statistics of one comparison row: the run is the unit.

Model (per point and metric, on the row's scale: log values, so that effects are relative, or
percentage points for CPU):

    x[run, r] = mu + b[run] + e[run, r]     repetition r of a run
    b[run]    ~ N(0, sigma_b^2)             what a second run moves: another minute, another
                                            neighbour, another placement of the same kernel
    e[run, r] ~ N(0, V)                     repetitions within one run (interleaved, minutes
                                            apart at most)

A run's value is the mean of its repetitions; its variance is tau^2 = sigma_b^2 + V / n. The
repetitions of one run estimate V only, and with it say nothing about sigma_b: a comparison
whose noise came from them alone calls two runs of one kernel different (docs/compare.md).
So tau^2 comes from runs, pooled over (each with its degrees of freedom):

  - each side with at least 2 runs: the sample variance of its runs' values (n - 1);
  - a noise record (noise.py): the variance of a run's value measured by A/A runs of the same
    experiment on this machine (K - 1). Recorded at up to n_rec repetitions per run, it is
    scaled by n_rec / n for runs of fewer repetitions (an upper bound on sigma_b^2 + V / n).

Under the null hypothesis (the same kernel on both sides) every source estimates the same
tau^2, so pooling them gives Student's t with the pooled degrees of freedom, exact under
normal run values. A side's tau^2 is never taken below what its own repetitions show (their
sample variance over n, and the histogram's resolution): a run whose repetitions disagree
cannot be quieter than that. Without any source there is no test: the row is inconclusive.

Power: the smallest difference a two-sided test at the given level detects with probability
POWER, from the noncentral t distribution; and how many runs per side would detect a target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np
from scipy import optimize, special, stats

POWER = 0.8
# Fewest runs whose spread is trusted as a run-to-run term (LKP-tests asks at least 3 runs per
# commit); also the fewest per side compare advises when nothing is known of that spread.
MIN_RUNS = 3
RUNS_LIMIT = 200  # advice beyond this many runs per side is "more than 200"


@dataclass(frozen=True)
class RunSide:
    """One side of one row on the test scale: a value per run."""

    values: np.ndarray  # per run: the mean of its repetitions
    repetitions: np.ndarray  # per run: how many repetitions that mean has
    floor: float = 0.0  # least variance of one run's value (its repetitions' own spread)

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def spread(self) -> float:
        """Sample variance of the runs' values (NaN below 2 runs)."""
        return float(np.var(self.values, ddof=1)) if self.n >= 2 else math.nan


def run_value(repetitions: np.ndarray) -> float:
    return float(np.mean(repetitions))


def repetition_floor(repetitions: np.ndarray, resolution: float = 0.0) -> float:
    """The least variance of a run's value its repetitions show: their sample variance (or the
    measurement's resolution, whichever is larger) over their number."""
    own = float(np.var(repetitions, ddof=1)) if len(repetitions) >= 2 else 0.0
    return max(own, resolution) / len(repetitions)


@dataclass(frozen=True)
class Known:
    """The variance of one run's value measured by A/A runs (a noise record's spread)."""

    variance: float
    df: float
    repetitions: int  # the most repetitions a recorded run had

    def at(self, repetitions: int) -> float:
        """The variance for runs of `repetitions` repetitions (never less than recorded)."""
        return self.variance * max(1.0, self.repetitions / max(repetitions, 1))


@dataclass(frozen=True)
class RunVariance:
    """The pooled variance of one run's value, its degrees of freedom, and where it came from."""

    value: float
    df: float
    sources: tuple[str, ...]  # "runs" (the sides' own), "noise record"
    known_df: float = 0.0  # the part of df that more runs would not add to

    def of(self, side: RunSide) -> float:
        return max(self.value, side.floor)


@dataclass(frozen=True)
class Test:
    """Student's t on the difference of the sides' mean run values (candidate - base)."""

    diff: float
    se: float
    df: float
    p: float
    ci_low: float
    ci_high: float


def run_variance(base: RunSide, cand: RunSide, known: Known | None) -> RunVariance | None:
    """Pool every estimate of the run-to-run variance; None when there is none."""
    parts: list[tuple[float, float]] = []
    sources: list[str] = []
    for side in (base, cand):
        if side.n >= 2:
            parts.append((side.spread, side.n - 1.0))
    if parts:
        sources.append("runs")
    known_df = 0.0
    if known is not None:
        fewest = int(min(base.repetitions.min(), cand.repetitions.min()))
        parts.append((known.at(fewest), known.df))
        sources.append("noise record")
        known_df = known.df
    if not parts:
        return None
    df = sum(d for _, d in parts)
    return RunVariance(sum(v * d for v, d in parts) / df, df, tuple(sources), known_df)


def _se(base: RunSide, cand: RunSide, variance: RunVariance) -> float:
    return math.sqrt(variance.of(base) / base.n + variance.of(cand) / cand.n)


def t_test(base: RunSide, cand: RunSide, variance: RunVariance, level: float) -> Test:
    """Student's t of mean(cand) - mean(base) and its `level` confidence interval."""
    diff = float(np.mean(cand.values) - np.mean(base.values))
    se, df = _se(base, cand, variance), variance.df
    if se == 0.0:
        # Runs that never vary and no recorded spread: nothing to test against.
        return Test(diff, 0.0, df, 0.0 if diff != 0 else 1.0, diff, diff)
    p = float(2.0 * stats.t.sf(abs(diff) / se, df))
    half = float(stats.t.ppf(0.5 + level / 2.0, df)) * se
    return Test(diff, se, df, p, diff - half, diff + half)


def power(effect: float, se: float, df: float, alpha: float) -> float:
    """Probability that a two-sided t test at alpha detects a true difference `effect`."""
    return _power_at(effect / se, df, alpha)


def _power_at(shift: float, df: float, alpha: float) -> float:
    critical = float(special.stdtrit(df, 1.0 - alpha / 2.0))
    upper = 1.0 - float(special.nctdtr(df, shift, critical))
    # The far tail against the effect: scipy returns NaN where it underflows; it is ~0 then.
    lower = float(np.nan_to_num(special.nctdtr(df, shift, -critical), nan=0.0))
    return upper + lower


@cache
def _detectable_shift(df: float, alpha: float, target_power: float) -> float:
    """The noncentrality (effect / se) a t test with df degrees of freedom detects."""
    critical = float(special.stdtrit(df, 1.0 - alpha / 2.0))
    high = max(4.0 * (critical + float(special.stdtrit(df, target_power))), 10.0)
    while _power_at(high, df, alpha) < target_power:
        high *= 4.0
    return float(optimize.brentq(lambda s: _power_at(s, df, alpha) - target_power, 0.0, high,
                                 xtol=1e-6))


def detectable(se: float, df: float, alpha: float, target_power: float = POWER) -> float:
    """Smallest |difference| detected with `target_power` (test scale); 0 without noise.

    The answer is se times a function of (df, alpha, power) only; df is rounded *down* to two
    significant digits (conservative: fewer df, larger difference) so that the rows and
    projections of a comparison share their root finding.
    """
    if se == 0.0:
        return 0.0
    df = min(df, 1e6)  # beyond a million degrees of freedom t is normal
    scale = 10.0 ** (math.floor(math.log10(df)) - 1)
    return se * _detectable_shift(math.floor(df / scale) * scale, alpha, target_power)


def runs_needed(base: RunSide, cand: RunSide, variance: RunVariance | None, effect: float,
                alpha: float) -> int | None:
    """Fewest runs per side that detect `effect` (test scale); None beyond RUNS_LIMIT.

    With n runs per side, both sides' own spreads add n - 1 degrees of freedom each to what a
    noise record gives. Without any estimate of the run-to-run variance, the runs' own
    repetitions stand in for it (a lower bound: the answer is then "at least"), and never fewer
    than MIN_RUNS.
    """
    if variance is None:
        fewest = MIN_RUNS
    else:  # a noise record can decide one run per side; the sides' own spread needs two
        fewest = 1 if variance.known_df > 0 else 2

    def detects(n: int) -> bool:
        if variance is None:
            parts = (base.floor, cand.floor)
            df = 2.0 * (n - 1)
        else:
            parts = (variance.of(base), variance.of(cand))
            df = variance.known_df + 2.0 * (n - 1)
        se = math.sqrt(sum(parts) / n)
        return detectable(se, df, alpha) <= effect

    if not detects(RUNS_LIMIT):
        return None
    low, high = fewest - 1, RUNS_LIMIT  # low fails (or is below the fewest), high detects
    while high - low > 1:
        middle = (low + high) // 2
        if middle >= fewest and detects(middle):
            high = middle
        else:
            low = middle
    return high
