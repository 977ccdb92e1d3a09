"""wanbench compare's statistics, with the run as the unit: A/A false positives with a
run-to-run term in the model, A/B detection, inconclusive data.

Synthetic runs (compare_synthetic) have the real runs' noise structure: a run-to-run part,
autocorrelated seconds, paced and saturated points.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from harness.analysis.compare import engine, noise
from harness.analysis.compare import stats as cstats
from harness.analysis.compare.engine import (
    IMPROVEMENT,
    INCONCLUSIVE,
    REGRESSION,
    UNCHANGED,
    Options,
    Side,
)

from .compare_synthetic import GRID, Effect, Noise, make_run

REPLY = Options(metrics=("reply_rate_rps",))
CPU = Options(metrics=("cpu_server_pct",))
SATURATED = [i for i, cell in enumerate(GRID) if cell["dispatch"] != "epoll" and cell["cold_conns"]]
POINT_IDS = make_run(seed=0).points.drop_duplicates("point_id")["point_id"].tolist()  # GRID order
NOW = datetime(2026, 11, 26, tzinfo=UTC)


def _side(seeds: range | list[int], kernel: str = "6.18.0-base", **kwargs: object) -> Side:
    return Side([make_run(seed=s, kernel=kernel, **kwargs).as_run() for s in seeds], kernel)


def _record(seeds: range, **kwargs: object) -> noise.NoiseRecord:
    """A noise record of A/A runs of the base kernel (the machine's history)."""
    return noise.record(_side(seeds, **kwargs).runs, NOW)


def _compare(base: Side, cand: Side, options: Options = REPLY,
             record: noise.NoiseRecord | None = None) -> engine.Comparison:
    return engine.compare(base, cand, options, record)


def _rows_at(result: engine.Comparison, indices: list[int]) -> pd.DataFrame:
    """The comparison's rows at these GRID indices (rows are sorted by label, not by GRID)."""
    return result.rows[result.rows["point_id"].isin([POINT_IDS[i] for i in indices])]


# -- the pieces ---------------------------------------------------------------------------


def _run_side(values: list[float], repetitions: int = 2, floor: float = 0.0) -> cstats.RunSide:
    return cstats.RunSide(np.array(values), np.full(len(values), repetitions), floor)


def test_runs_alone_give_students_t_as_scipy() -> None:
    base, cand = _run_side([10.0, 11.0, 10.5]), _run_side([9.0, 9.8, 9.1, 9.4])
    variance = cstats.run_variance(base, cand, None)
    test = cstats.t_test(base, cand, variance, 0.95)
    reference = stats.ttest_ind(cand.values, base.values, equal_var=True)
    assert variance.sources == ("runs",) and variance.df == 5
    assert test.p == pytest.approx(reference.pvalue)
    assert test.diff / test.se == pytest.approx(reference.statistic)


def test_one_run_per_side_has_no_run_to_run_variance_without_a_record() -> None:
    one, other = _run_side([10.0]), _run_side([12.5])
    assert cstats.run_variance(one, other, None) is None
    known = cstats.Known(variance=0.04, df=9.0, repetitions=2)
    variance = cstats.run_variance(one, other, known)
    assert (variance.value, variance.df, variance.sources) == (0.04, 9.0, ("noise record",))


def test_sources_pool_by_their_degrees_of_freedom() -> None:
    base, cand = _run_side([1.0, 2.0, 3.0]), _run_side([5.0])  # spread 1.0 on 2 df
    variance = cstats.run_variance(base, cand, cstats.Known(4.0, 6.0, 2))
    assert variance.df == 8.0
    assert variance.value == pytest.approx((1.0 * 2 + 4.0 * 6) / 8)


def test_a_record_of_more_repetitions_is_scaled_up_for_runs_of_fewer() -> None:
    known = cstats.Known(variance=1.0, df=9.0, repetitions=4)
    assert known.at(2) == 2.0  # V/2 can be up to twice V/4: never less noise than that
    assert known.at(4) == known.at(8) == 1.0  # more repetitions: no credit taken


def test_a_run_is_never_quieter_than_its_own_repetitions_show() -> None:
    calm = cstats.RunVariance(1e-6, 9.0, ("noise record",))
    wild = _run_side([0.0], floor=cstats.repetition_floor(np.log([100.0, 60.0])))
    steady = _run_side([0.0], floor=cstats.repetition_floor(np.log([100.0, 100.1])))
    assert calm.of(wild) > 100 * calm.value
    assert calm.of(steady) == calm.value


def test_detectable_difference_has_the_power_asked_for() -> None:
    mde = cstats.detectable(se=0.01, df=12, alpha=0.05 / 30)
    critical = stats.t.ppf(1 - 0.05 / 60, 12)
    power = stats.nct.sf(critical, 12, mde / 0.01) + stats.nct.cdf(-critical, 12, mde / 0.01)
    assert power == pytest.approx(cstats.POWER, abs=1e-4)


def test_runs_needed_grows_with_the_run_to_run_variance() -> None:
    base, cand = _run_side([0.0]), _run_side([0.0])
    quiet = cstats.runs_needed(base, cand, cstats.RunVariance(1e-4, 9.0, ("noise record",), 9.0),
                               0.05, 0.05 / 12)
    loud = cstats.runs_needed(base, cand, cstats.RunVariance(1e-3, 9.0, ("noise record",), 9.0),
                              0.05, 0.05 / 12)
    assert quiet is not None and loud is not None and 1 <= quiet < loud
    # nothing known: at least MIN_RUNS, whatever the repetitions show
    assert cstats.runs_needed(base, cand, None, 0.05, 0.05 / 12) == cstats.MIN_RUNS


def test_benjamini_hochberg() -> None:
    q = engine.benjamini_hochberg(np.array([0.01, 0.04, 0.03, np.nan, 0.5]))
    # by hand: p x m / rank = 0.04, 0.06, 0.0533, then the running minimum from the top
    assert q[:3] == pytest.approx([0.04, 0.16 / 3, 0.16 / 3])
    assert np.isnan(q[3])
    assert q[4] == pytest.approx(0.5)


# -- A/A: false positives, the run-to-run term in the model ---------------------------------

# run-to-run sd of a run's level, repetitions per run
AA_SETTINGS = [(0.005, 2), (0.02, 2), (0.05, 3)]


@pytest.mark.parametrize("run_cv, reps", AA_SETTINGS)
def test_one_run_per_side_without_a_record_never_fails(run_cv: float, reps: int) -> None:
    """The issue's false alarm: runs far apart while each run's repetitions agree."""
    for trial in range(10):
        quiet_reps = Noise(cv=0.0005, cv_paced=0.0005, run_cv=run_cv)
        result = _compare(_side([2 * trial], repetitions=reps, noise=quiet_reps),
                          _side([2 * trial + 1], repetitions=reps, noise=quiet_reps))
        assert result.count(REGRESSION) == 0
        assert (result.rows["verdict"] == INCONCLUSIVE).all()
        assert result.rows["reason"].str.contains("one run per side").all()


def test_false_positive_rate_of_aa_comparisons_with_the_run_term() -> None:
    """A/A pairs of one kernel (same noise, different runs), 12 points each, seeded:
    3 runs per side from their own spread, and one run per side with a noise record of 10
    other A/A runs. Benjamini-Hochberg at 0.05 bounds the comparisons that flag anything."""
    flagged = significant = trials = 0
    for k, (run_cv, reps) in enumerate(AA_SETTINGS):
        noisy = Noise(run_cv=run_cv)
        for block in range(2):
            seed = 10_000 * (k + 1) + 1000 * block
            record = _record(range(seed + 500, seed + 510), repetitions=reps, noise=noisy)
            for trial in range(12):
                s = seed + 10 * trial
                pairs = [(_side(range(s, s + 3), repetitions=reps, noise=noisy),
                          _side(range(s + 3, s + 6), repetitions=reps, noise=noisy), None),
                         (_side([s + 6], repetitions=reps, noise=noisy),
                          _side([s + 7], repetitions=reps, noise=noisy), record)]
                for base, cand, known in pairs:
                    result = _compare(base, cand, record=known)
                    trials += 1
                    flagged += result.count(REGRESSION) > 0
                    significant += bool((result.rows["q"] < 0.05).any())
    assert trials == 144
    assert flagged / trials <= 0.05
    assert significant / trials <= 0.05


def test_aa_intervals_cover_no_change() -> None:
    noisy = Noise(run_cv=0.02)
    record = _record(range(900, 910), noise=noisy)
    covered = []
    for trial in range(10):
        result = _compare(_side([2 * trial], noise=noisy), _side([2 * trial + 1], noise=noisy),
                          record=record)
        covered += list((result.rows["ci_low"] <= 0) & (result.rows["ci_high"] >= 0))
    assert np.mean(covered) >= 0.9


# -- A/B: detection -----------------------------------------------------------------------


@pytest.mark.parametrize("drop", [0.10, 0.20, 0.50])
def test_ab_drop_at_every_point_is_a_regression_with_three_runs_per_side(drop: float) -> None:
    result = _compare(_side(range(11, 14)), _side(range(14, 17), "6.19.0-cand",
                                                  effect=Effect(throughput=1 - drop)))
    assert result.verdict == REGRESSION
    assert (result.rows["verdict"] == REGRESSION).mean() >= 0.9
    assert result.rows["change"].to_numpy() == pytest.approx(-drop, abs=0.02)
    inside = (result.rows["ci_low"] <= -drop) & (-drop <= result.rows["ci_high"])
    assert inside.mean() >= 0.8


def test_ab_one_run_per_side_with_a_noise_record_finds_a_drop() -> None:
    record = _record(range(200, 210))
    result = _compare(_side([11]), _side([12], "6.19.0-cand", effect=Effect(throughput=0.8)),
                      record=record)
    assert (result.rows["verdict"] == REGRESSION).all()
    inside = (result.rows["ci_low"] <= -0.2) & (-0.2 <= result.rows["ci_high"])
    assert inside.mean() >= 0.8


def test_ab_latency_rise_is_a_regression() -> None:
    options = Options(metrics=("resp_time_mean_ms",))
    result = _compare(_side(range(13, 17)), _side(range(17, 21), "6.19.0-cand",
                                                  effect=Effect(latency=1.5)), options)
    assert (result.rows["verdict"] == REGRESSION).mean() >= 0.9


def test_ab_lone_drop_at_a_saturated_point_is_found_there_only() -> None:
    """The hardest case for the correction: one changed point among 12 (p < 0.05/12)."""
    record = _record(range(300, 310))
    found = elsewhere = 0
    for seed in range(8):
        point = SATURATED[seed % len(SATURATED)]
        result = _compare(_side(range(100 + 6 * seed, 103 + 6 * seed)),
                          _side(range(103 + 6 * seed, 106 + 6 * seed), "6.19.0-cand",
                                effect=Effect(throughput=0.8, points=(point,))), record=record)
        verdicts = result.rows.set_index("point_id")["verdict"]
        found += verdicts[POINT_IDS[point]] == REGRESSION
        elsewhere += int((verdicts.drop(POINT_IDS[point]) == REGRESSION).sum())
    assert found >= 7
    assert elsewhere == 0


def test_improvement_is_not_a_regression() -> None:
    result = _compare(_side(range(21, 24)), _side(range(24, 27), "6.19.0-cand",
                                                  effect=Effect(throughput=1.2)))
    assert set(result.rows["verdict"]) == {IMPROVEMENT}
    assert result.verdict == "no regression"


def test_significant_change_below_min_effect_is_unchanged() -> None:
    quiet = Noise(cv=0.002, run_cv=0.002)
    result = _compare(_side(range(23, 28), noise=quiet),
                      _side(range(28, 33), "6.19.0-cand", noise=quiet,
                            effect=Effect(throughput=0.99)))
    assert (result.rows["q"] < 0.05).all()  # significant ...
    assert (result.rows["verdict"] == UNCHANGED).all()  # ... but smaller than 2 %


# -- CPU: percentage points ----------------------------------------------------------------


def test_cpu_changes_are_percentage_points_and_one_point_is_the_least_regression() -> None:
    """+25 % of a 5 % CPU is 1.25 points; +2 % of 99 % is 2 points: judged alike, in points."""
    quiet = Noise(cv=0.001, run_cv=0.001)
    base = _side(range(40, 45), noise=quiet)
    small = _compare(base, _side(range(45, 50), "6.19.0-cand", noise=quiet,
                                 effect=Effect(cpu=1.005)), CPU)
    # 0.2 to 0.5 points: significant, yet below a point
    assert (small.rows["scale"] == "points").all()
    assert (small.rows["verdict"] != REGRESSION).all()
    large = _compare(base, _side(range(45, 50), "6.19.0-cand", noise=quiet,
                                 effect=Effect(cpu=1.05)), CPU)
    # 1.75 to 5 points: regressions, the change in points (cand - base)
    assert (large.rows["verdict"] == REGRESSION).all()
    change = large.rows["cand"] - large.rows["base"]
    assert large.rows["change"].to_numpy() == pytest.approx(change.to_numpy())


# -- inconclusive ---------------------------------------------------------------------------


def test_two_runs_per_side_of_noisy_points_are_inconclusive_with_advice() -> None:
    noisy = Noise(run_cv=0.05)
    result = _compare(_side(range(33, 35), noise=noisy),
                      _side(range(35, 37), "6.19.0-cand", noise=noisy))
    inconclusive = result.rows[result.rows["verdict"] == INCONCLUSIVE]
    assert result.verdict == INCONCLUSIVE
    assert (inconclusive["detectable"] > 0.05).all()
    assert (inconclusive["runs_needed"].dropna() > 2).all()
