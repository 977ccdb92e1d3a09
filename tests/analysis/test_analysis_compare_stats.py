"""wanbench compare's statistics: A/A false positives, A/B detection, inconclusive data.

Synthetic runs (compare_synthetic) have the real runs' noise structure: autocorrelated
seconds, a run-to-run component, paced and saturated points.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from harness.analysis.compare import engine
from harness.analysis.compare import stats as cstats
from harness.analysis.compare.engine import INCONCLUSIVE, REGRESSION, UNCHANGED, Options

from .compare_synthetic import GRID, Effect, Noise, make_run

REPLY = Options(metrics=("reply_rate_rps",))
SATURATED = [i for i, cell in enumerate(GRID) if cell["dispatch"] != "epoll" and cell["cold_conns"]]
POINT_IDS = make_run(seed=0).points.drop_duplicates("point_id")["point_id"].tolist()  # GRID order


def _rows_at(result: engine.Comparison, indices: list[int]) -> pd.DataFrame:
    """The comparison's rows at these GRID indices (rows are sorted by label, not by GRID)."""
    return result.rows[result.rows["point_id"].isin([POINT_IDS[i] for i in indices])]


def _compare(base_seed: int, cand_seed: int, options: Options = REPLY, **kwargs: object
             ) -> engine.Comparison:
    cand_kwargs = dict(kwargs)
    base_kwargs = {k: v for k, v in kwargs.items() if k != "effect"}
    base = make_run(seed=base_seed, **base_kwargs).as_run()
    cand = make_run(seed=cand_seed, kernel="6.19.0-cand", **cand_kwargs).as_run()
    return engine.compare(base, cand, options, "6.18.0-base", "6.19.0-cand")


# -- the pieces ---------------------------------------------------------------------------


def test_ar1_factor() -> None:
    assert cstats.ar1_factor(5, 0.0) == 1.0
    # 1 + 2 * (0.8 * 0.5 + 0.6 * 0.25 + 0.4 * 0.125 + 0.2 * 0.0625)
    assert cstats.ar1_factor(5, 0.5) == pytest.approx(2.225)


@pytest.mark.parametrize("rho", [0.0, 0.3, 0.6])
def test_pooled_autocorrelation_recovers_rho(rho: float) -> None:
    rng = np.random.default_rng(1)
    series = []
    for _ in range(300):
        e = np.empty(10)
        e[0] = rng.normal()
        for t in range(1, 10):
            e[t] = rho * e[t - 1] + rng.normal(0, np.sqrt(1 - rho**2))
        series.append(100 + e)
    assert cstats.lag1_autocorrelation(series) == pytest.approx(rho, abs=0.06)


def test_seconds_noise_is_variance_of_the_mean() -> None:
    seconds = [np.array([99.0, 101.0, 100.0, 98.0, 102.0])] * 2
    noise = cstats.seconds_noise(seconds, rho=0.0)
    assert noise is not None
    assert noise.variance == pytest.approx(np.var(seconds[0], ddof=1) / 5 / 100**2)
    assert noise.df == 8
    assert cstats.seconds_noise([np.array([1.0, 2.0])], 0.0) is None  # too few seconds


def test_welch_on_repetitions_matches_scipy() -> None:
    base, cand = np.log([10.0, 11.0, 10.5]), np.log([9.0, 9.8, 9.1, 9.4])
    sides = cstats.Side(base), cstats.Side(cand)
    variances = [cstats.repetition_variance(s, None) for s in sides]
    test = cstats.welch(sides[0], variances[0], sides[1], variances[1], 0.95)
    reference = stats.ttest_ind(cand, base, equal_var=False)
    assert test.p == pytest.approx(reference.pvalue)
    assert test.diff / test.se == pytest.approx(reference.statistic)


def test_detectable_difference_has_the_power_asked_for() -> None:
    mde = cstats.detectable(se=0.01, df=12, alpha=0.05 / 30)
    critical = stats.t.ppf(1 - 0.05 / 60, 12)
    power = stats.nct.sf(critical, 12, mde / 0.01) + stats.nct.cdf(-critical, 12, mde / 0.01)
    assert power == pytest.approx(cstats.POWER, abs=1e-4)


def test_benjamini_hochberg() -> None:
    q = engine.benjamini_hochberg(np.array([0.01, 0.04, 0.03, np.nan, 0.5]))
    # by hand: p x m / rank = 0.04, 0.06, 0.0533, then the running minimum from the top
    assert q[:3] == pytest.approx([0.04, 0.16 / 3, 0.16 / 3])
    assert np.isnan(q[3])
    assert q[4] == pytest.approx(0.5)


def test_a_point_far_noisier_than_its_run_uses_its_own_repetitions() -> None:
    calm = [cstats.Side(np.log([100.0, 100.1, 99.9]),
                        cstats.Seconds(variance=1e-6, df=12.0, rho=0.0)) for _ in range(10)]
    knee = cstats.Side(np.log([100.0, 70.0, 99.0]), cstats.Seconds(1e-6, 12.0, 0.0))
    ratio = cstats.run_ratio([*calm, knee])
    assert cstats.repetition_variance(calm[0], ratio).source == "seconds"
    variance = cstats.repetition_variance(knee, ratio)
    assert (variance.source, variance.df) == ("repetitions", 2.0)


# -- A/A: false positives -----------------------------------------------------------------

AA_GRID = [
    # repetitions, window (s), per-second autocorrelation, run-to-run / within variance
    (reps, window, rho, ratio)
    for reps, window in itertools.product((2, 3, 5), (3, 5, 10))
    for rho, ratio in ((0.0, 0.0), (0.3, 1.0), (0.6, 0.5))
]


def test_false_positive_rate_over_a_grid_of_aa_comparisons() -> None:
    """27 noise settings x 4 pairs of identical-build runs, 12 points each: at most 5 % of
    comparisons may flag anything (BH at 0.05 controls this under the global null)."""
    flagged = significant = trials = 0
    for k, (reps, window, rho, ratio) in enumerate(AA_GRID):
        noise = Noise(rho=rho, between_ratio=ratio)
        for trial in range(4):
            seed = 1000 * k + 2 * trial
            result = _compare(seed, seed + 1, repetitions=reps, duration_s=window, noise=noise)
            trials += 1
            flagged += result.count(REGRESSION) > 0
            significant += bool((result.rows["q"] < 0.05).any())
    assert trials == 108
    assert flagged / trials <= 0.05
    assert significant / trials <= 0.05


def test_aa_three_repetitions_of_five_seconds_find_nothing() -> None:
    result = _compare(7, 8, options=Options())
    assert result.count(REGRESSION) == 0
    reply = result.rows[result.rows["metric"] == "reply_rate_rps"]
    # At this noise 3 x 5 s can promise a 5 % regression would show at most points.
    assert (reply["verdict"] == UNCHANGED).mean() >= 0.75
    assert reply["change"].abs().max() < 0.03


# -- A/B: detection -----------------------------------------------------------------------


@pytest.mark.parametrize("drop", [0.05, 0.20, 0.50])
def test_ab_drop_at_every_point_is_a_regression(drop: float) -> None:
    result = _compare(11, 12, effect=Effect(throughput=1 - drop))
    assert result.verdict == REGRESSION
    assert (result.rows["verdict"] == REGRESSION).all()
    assert result.rows["change"].to_numpy() == pytest.approx(-drop, abs=0.015)
    inside = (result.rows["ci_low"] <= -drop) & (-drop <= result.rows["ci_high"])
    assert inside.mean() >= 0.8


@pytest.mark.parametrize("rise", [0.20, 0.50])
def test_ab_latency_rise_is_a_regression(rise: float) -> None:
    options = Options(metrics=("resp_time_mean_ms",))
    result = _compare(13, 14, options, repetitions=5, effect=Effect(latency=1 + rise))
    assert (result.rows["verdict"] == REGRESSION).mean() >= 0.9


def test_ab_lone_five_percent_drop_at_a_saturated_point_is_found() -> None:
    """The hardest case for the correction: one changed point among 12 (p < 0.05/12)."""
    found = elsewhere = 0
    for seed in range(10):
        point = SATURATED[seed % len(SATURATED)]
        result = _compare(100 + 2 * seed, 101 + 2 * seed,
                          effect=Effect(throughput=0.95, points=(point,)))
        verdicts = result.rows.set_index("point_id")["verdict"]
        found += verdicts[POINT_IDS[point]] == REGRESSION
        elsewhere += int((verdicts.drop(POINT_IDS[point]) == REGRESSION).sum())
    assert found >= 8
    assert elsewhere == 0


def test_improvement_is_not_a_regression() -> None:
    result = _compare(21, 22, effect=Effect(throughput=1.2))
    assert set(result.rows["verdict"]) == {"improvement"}
    assert result.verdict == "no regression"


def test_significant_change_below_min_effect_is_unchanged() -> None:
    quiet = Noise(cv=0.002)
    result = _compare(23, 24, noise=quiet, effect=Effect(throughput=0.99))
    assert (_rows_at(result, SATURATED)["q"] < 0.05).all()  # significant ...
    assert (result.rows["verdict"] == UNCHANGED).all()  # ... but smaller than 2 %


# -- inconclusive ---------------------------------------------------------------------------


def test_one_repetition_is_inconclusive() -> None:
    result = _compare(31, 32, repetitions=1, effect=Effect(throughput=0.5))
    assert (result.rows["verdict"] == INCONCLUSIVE).all()
    assert result.verdict == INCONCLUSIVE
    assert result.rows["reason"].str.contains("at least 2 per side").all()


def test_too_few_noisy_samples_are_inconclusive_with_advice() -> None:
    noisy = Noise(cv=0.08, between_ratio=1.0)
    result = _compare(33, 34, repetitions=2, duration_s=3, noise=noisy)
    inconclusive = result.rows[result.rows["verdict"] == INCONCLUSIVE]
    assert result.verdict == INCONCLUSIVE
    assert (_rows_at(result, SATURATED)["verdict"] == INCONCLUSIVE).all()
    assert (inconclusive["detectable"] > 0.05).all()
    assert (inconclusive["repetitions_needed"].dropna() > 2).all()
