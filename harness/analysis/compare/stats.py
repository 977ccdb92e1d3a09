"""The statistics of one comparison row: repetition variance, Welch test, interval, power.

Model (per run, point and metric, on the log scale so that effects are relative):

    x[r]    = mu + a[r] + e_mean[r]        value of repetition r (its window mean)
    a[r]    ~ N(0, sigma_a^2)              run-to-run state (placement, caches, neighbours)
    e_mean  ~ N(0, w)                      noise of averaging T autocorrelated seconds

Repetitions are the independent units. The variance of one repetition's value is
V = sigma_a^2 + w. It can always be estimated from the repetition values alone (s_B^2, n - 1
degrees of freedom), which with 2 or 3 repetitions leaves a t-test 1 to 4 degrees of freedom:
honest, but blind to a 5 % change at ordinary noise. The per-second samples estimate w with
many more degrees of freedom; what they cannot see is sigma_a. We therefore assume that the
*ratio* kappa = V / w is a property of the run (the same machine state hits every point of
a run alike), estimate it once per run and metric from all its points (sum of n - 1 degrees
of freedom), and use V = kappa * w per point. kappa is not allowed below 1 (variance
components are non-negative). A point whose own repetitions spread more than kappa * w
allows (one-sided F test at HETEROGENEITY_LEVEL) falls back to its own s_B^2: its run-to-run
noise is larger than the run's and the repetitions are then the only honest estimate.

Autocorrelation: seconds within a repetition are not independent. Each repetition's series
is treated as AR(1). Its lag-1 autocorrelation is pooled over every repetition of every point
of both runs for the metric (per point it would rest on a dozen pairs: in simulation that
let through 3x too many small p values), then corrected for the bias of short demeaned
series, E[r1] ~ rho - (1 + 3 rho) / T (solved for rho when T > 4, else added at r1), and
clipped to [0, MAX_RHO] (negative correlation would shrink the variance; we do not take that
credit). The variance of the mean of T seconds then uses the exact finite-T AR(1) factor
f = 1 + 2 sum_k (1 - k/T) rho^k, which also undoes the downward bias of the sample variance
of an autocorrelated series. What the AR(1) model misses in level is absorbed by kappa, which
compares the repetitions' actual spread with the seconds' prediction. Fewer than 3 seconds
per repetition: the seconds are not used.

The two sides are compared with Welch's t on the difference of mean log values, with
Welch-Satterthwaite degrees of freedom; the interval of the relative change is
exp(d +- t * se) - 1. Power: the smallest |d| that a two-sided test at the given level
detects with probability POWER, from the noncentral t distribution.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np
from scipy import optimize, special, stats

POWER = 0.8
# Only gross excess (a point at a knee, saturated in one repetition and not in another) sends
# a point to its repetitions alone: a fallback leaves 1 to 4 degrees of freedom, which makes
# the row inconclusive, so a liberal level would make most comparisons inconclusive.
HETEROGENEITY_LEVEL = 0.01
MAX_RHO = 0.9
MIN_SECONDS = 3  # a lag-1 autocorrelation needs at least 2 pairs per repetition


@dataclass(frozen=True)
class Seconds:
    """The within-repetition noise of one side's repetitions, from their per-second samples."""

    variance: float  # mean over repetitions of the variance of a repetition's value (w)
    df: float  # degrees of freedom of that estimate (autocorrelation-adjusted)
    rho: float  # the lag-1 autocorrelation used


@dataclass(frozen=True)
class Side:
    """One side of one point x metric, on the test scale."""

    values: np.ndarray  # one per repetition
    seconds: Seconds | None = None  # None: no usable per-second samples
    floor: float = 0.0  # resolution floor of a repetition's variance (e.g. histogram buckets)

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def between(self) -> float:
        """s_B^2, the sample variance of the repetition values (NaN below 2 repetitions)."""
        return float(np.var(self.values, ddof=1)) if self.n >= 2 else math.nan


@dataclass(frozen=True)
class RepVariance:
    """Variance of one repetition's value, its degrees of freedom, and how it was obtained."""

    value: float
    df: float
    source: str  # "repetitions" (s_B^2) or "seconds" (kappa * w)
    n: int
    within: float = 0.0  # w, for "seconds"
    ratio: float = 1.0  # kappa, for "seconds"
    df_within: float = 0.0
    df_ratio: float = 0.0

    def projected(self, n: int, longer: float = 1.0) -> tuple[float, float] | None:
        """(variance, df) with n repetitions and a window `longer` times as long.

        Only "seconds" knows how much of the variance a longer window removes (w, not the
        run-to-run part); for "repetitions" a longer window returns None.
        """
        if self.source == "repetitions":
            return (self.value, n - 1.0) if longer == 1.0 else None
        value = max((self.ratio - 1.0) * self.within + self.within / longer, 0.0)
        df_within = self.df_within * (n / self.n) * longer
        df_ratio = self.df_ratio * (n - 1.0) / max(self.n - 1.0, 1.0)
        return value, _combined_df(df_within, df_ratio)


@dataclass(frozen=True)
class Test:
    """Welch's t on the difference of the sides' means (candidate - base, test scale)."""

    diff: float
    se: float
    df: float
    p: float
    ci_low: float
    ci_high: float


def _combined_df(df_a: float, df_b: float) -> float:
    """Satterthwaite df of a product of two independent variance estimates."""
    return 1.0 / (1.0 / df_a + 1.0 / df_b)


def ar1_factor(length: int, rho: float) -> float:
    """f with Var(mean of `length` AR(1) values) = sigma^2 * f / length."""
    lags = np.arange(1, length)
    return float(1.0 + 2.0 * np.sum((1.0 - lags / length) * rho**lags))


def lag1_autocorrelation(series: list[np.ndarray]) -> float | None:
    """Pooled, bias-corrected lag-1 autocorrelation in [0, MAX_RHO]; None without data."""
    usable = [np.asarray(s, dtype=float) for s in series if len(s) >= MIN_SECONDS]
    if not usable:
        return None
    numerator = denominator = 0.0
    for values in usable:
        centred = values - values.mean()
        numerator += float(centred[:-1] @ centred[1:])
        denominator += float(centred @ centred)
    if denominator == 0.0:
        return 0.0  # constant series: nothing correlates
    r1 = numerator / denominator
    length = float(np.mean([len(s) for s in usable]))
    if length > 4:
        rho = (length * r1 + 1.0) / (length - 3.0)  # E[r1] = rho - (1 + 3 rho) / T, solved
    else:
        rho = r1 + (1.0 + 3.0 * r1) / length  # solving would multiply r1's noise by T/(T-3)
    return float(np.clip(rho, 0.0, MAX_RHO))


def seconds_noise(series: list[np.ndarray], rho: float) -> Seconds | None:
    """Relative variance of each repetition's mean from its seconds (delta method on log).

    Every repetition needs MIN_SECONDS samples and a positive mean, and some second must
    differ from another, else None.
    """
    if not series or any(len(s) < MIN_SECONDS for s in series):
        return None
    variances, dfs = [], []
    for values in series:
        values = np.asarray(values, dtype=float)
        length, mean = len(values), float(values.mean())
        if not mean > 0:
            return None
        f = ar1_factor(length, rho)
        if np.ptp(values) <= 1e-12 * mean:
            sigma2 = 0.0  # constant to rounding: np.var would return rounding noise
        else:
            # E[s^2] = sigma^2 (T - f) / (T - 1) for AR(1); Var(mean) = sigma^2 f / T.
            sigma2 = float(np.var(values, ddof=1)) * (length - 1) / (length - f)
        variances.append(sigma2 * f / length / mean**2)
        dfs.append((length - 1) / f)
    if not any(variances):
        return None  # seconds that never vary (a copied value, not a measurement)
    return Seconds(float(np.mean(variances)), float(np.sum(dfs)), rho)


def run_ratio(sides: list[Side]) -> tuple[float, float] | None:
    """kappa = Var(repetition value) / w over one run's points, and its degrees of freedom.

    E[s_B^2 / w_hat] = kappa * df_w / (df_w - 2) for a chi-square w_hat, so each point's ratio
    is scaled back by (df_w - 2) / df_w; points are weighted by their n - 1.
    """
    weights, ratios = [], []
    for side in sides:
        if side.n < 2 or side.seconds is None or side.seconds.df <= 2:
            continue
        if side.seconds.variance <= 0:
            continue
        unbias = (side.seconds.df - 2.0) / side.seconds.df
        weights.append(side.n - 1.0)
        ratios.append(side.between / side.seconds.variance * unbias)
    if not weights:
        return None
    ratio = float(np.average(ratios, weights=weights))
    return max(ratio, 1.0), float(np.sum(weights))


def repetition_variance(side: Side, ratio: tuple[float, float] | None) -> RepVariance | None:
    """Variance of one repetition's value for this side; None below 2 repetitions."""
    if side.n < 2:
        return None
    own = RepVariance(max(side.between, side.floor), side.n - 1.0, "repetitions", side.n)
    if side.seconds is None or ratio is None or side.seconds.variance <= 0:
        return own
    kappa, df_ratio = ratio
    prior = kappa * side.seconds.variance
    df_prior = _combined_df(side.seconds.df, df_ratio)
    critical = stats.f.ppf(1.0 - HETEROGENEITY_LEVEL, side.n - 1.0, df_prior)
    if side.between > prior * critical:
        return own  # this point's run-to-run noise exceeds the run's: trust its repetitions
    # Never claim less noise than the point's own repetitions show. Under the model this is
    # conservative (V >= kappa * w, whose t statistic has df_prior); when the ratio is not
    # common to all points it limits the damage (simulation: docs/compare.md).
    value = max(prior, side.between)
    return RepVariance(max(value, side.floor), df_prior, "seconds", side.n,
                       side.seconds.variance, kappa, side.seconds.df, df_ratio)


def welch_df(part_b: float, df_b: float, part_c: float, df_c: float) -> float:
    """Welch-Satterthwaite degrees of freedom of part_b + part_c (variances of the means)."""
    total = part_b + part_c
    if total <= 0:
        return math.inf
    return total**2 / (part_b**2 / df_b + part_c**2 / df_c)


def welch(base: Side, var_b: RepVariance, cand: Side, var_c: RepVariance,
          level: float) -> Test:
    """Welch's t of mean(cand) - mean(base) and its `level` confidence interval."""
    diff = float(np.mean(cand.values) - np.mean(base.values))
    part_b, part_c = var_b.value / base.n, var_c.value / cand.n
    se = math.sqrt(part_b + part_c)
    df = welch_df(part_b, var_b.df, part_c, var_c.df)
    if se == 0.0:
        # Both sides without any variation: no noise to test against.
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


def _detects(var_b: RepVariance, var_c: RepVariance, n: int, longer: float, effect: float,
             alpha: float) -> bool | None:
    proj_b, proj_c = var_b.projected(n, longer), var_c.projected(n, longer)
    if proj_b is None or proj_c is None:
        return None
    part_b, part_c = proj_b[0] / n, proj_c[0] / n
    se = math.sqrt(part_b + part_c)
    df = welch_df(part_b, proj_b[1], part_c, proj_c[1])
    return detectable(se, df, alpha) <= effect


def repetitions_needed(var_b: RepVariance, var_c: RepVariance, effect: float, alpha: float,
                       limit: int = 200) -> int | None:
    """Fewest repetitions per side that detect `effect` (test scale); None beyond `limit`."""
    if not _detects(var_b, var_c, limit, 1.0, effect, alpha):
        return None
    low, high = 1, limit  # low fails (or is below 2), high detects
    while high - low > 1:
        middle = (low + high) // 2
        if middle >= 2 and _detects(var_b, var_c, middle, 1.0, effect, alpha):
            high = middle
        else:
            low = middle
    return high


def window_factor_needed(var_b: RepVariance, var_c: RepVariance, effect: float,
                         alpha: float, limit: float = 64.0) -> float | None:
    """How many times longer a window would detect `effect` with today's repetitions.

    None when the repetitions' variance cannot be split (no per-second samples) or when even
    `limit` times longer would not do (run-to-run noise dominates: more repetitions help).
    """
    n = min(var_b.n, var_c.n)
    factor = 2.0
    while factor <= limit:
        detects = _detects(var_b, var_c, n, factor, effect, alpha)
        if detects is None:
            return None
        if detects:
            return factor
        factor *= 2.0
    return None
