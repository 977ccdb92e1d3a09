"""wanbench compare: statistics on synthetic runs with known effects, verdicts and exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.compare import (
    IMPROVEMENT,
    REGRESSION,
    UNCHANGED,
    benjamini_hochberg,
    compare_points,
    median_ci,
)

from .conftest import run_command
from .synthetic import make_points, redraw, write_run

SCENARIO = "bm98-fig9-saturation-vs-cold"
GRID_20 = {"cold_conns": [0, 500, 1000, 1500, 2000],
           "offered_rate_rps": [500.0, 1000.0, 1500.0, 2000.0]}


def _runs(tmp_path: Path, repetitions: int = 10, **candidate: object) -> tuple[Path, Path]:
    base = make_points(SCENARIO, GRID_20, repetitions=repetitions, seed=1,
                       kernel_release="6.1.0-base")
    cand = make_points(SCENARIO, GRID_20, repetitions=repetitions, seed=2,
                       kernel_release="6.18.0-cand", **candidate)
    return write_run(tmp_path, base), write_run(tmp_path, cand)


def test_ten_percent_throughput_drop_is_flagged() -> None:
    template = make_points(SCENARIO, GRID_20, repetitions=10, noise=0.0)
    result = compare_points(redraw(template, seed=1, noise=0.03),
                            redraw(template, seed=2, noise=0.03, throughput=0.9),
                            metrics=["reply_rate_rps"])
    assert len(result.rows) == 20
    assert (result.rows["verdict"] == REGRESSION).all()
    assert result.rows["rel_change"].median() == pytest.approx(-0.10, abs=0.02)


def test_identical_distributions_rarely_flagged() -> None:
    template = make_points(SCENARIO, GRID_20, repetitions=10, noise=0.0)
    trials, flagged, significant = 200, 0, 0
    for trial in range(trials):
        result = compare_points(redraw(template, seed=10_000 + 2 * trial),
                                redraw(template, seed=10_001 + 2 * trial),
                                metrics=["reply_rate_rps"])
        flagged += bool((result.rows["verdict"] != UNCHANGED).any())
        # Without the minimum effect, Benjamini-Hochberg alone must hold the grid's error
        # rate (20 raw tests at 5 % would flag about 64 % of trials).
        significant += bool((result.rows["q_value"] < 0.05).any())
    assert flagged / trials <= 0.05
    assert significant / trials <= 0.05


def test_small_change_below_min_effect_is_not_reported() -> None:
    template = make_points(SCENARIO, GRID_20, repetitions=10, noise=0.0)
    result = compare_points(redraw(template, seed=1, noise=0.005),
                            redraw(template, seed=2, noise=0.005, throughput=0.97),
                            metrics=["reply_rate_rps"])
    assert (result.rows["q_value"] < 0.05).all()  # significant ...
    assert (result.rows["verdict"] == UNCHANGED).all()  # ... but smaller than 5 %


def test_direction_of_metrics() -> None:
    base = make_points(SCENARIO, GRID_20, repetitions=10, seed=1)
    faster = make_points(SCENARIO, GRID_20, repetitions=10, seed=2, throughput=1.2)
    slower = make_points(SCENARIO, GRID_20, repetitions=10, seed=2, latency=1.3)
    assert set(compare_points(base, faster, metrics=["reply_rate_rps"]).rows["verdict"]) == {
        IMPROVEMENT}
    assert set(compare_points(base, slower, metrics=["resp_time_mean_ms"]).rows["verdict"]) == {
        REGRESSION}


def test_median_ci_order_statistics() -> None:
    values = np.arange(10.0, 0.0, -1.0)  # 1..10, unsorted
    low, high, coverage = median_ci(values)
    assert (low, high) == (2.0, 9.0)  # the classic (x(2), x(9)) interval for n = 10
    assert coverage == pytest.approx(0.9785, abs=1e-3)
    assert median_ci(np.array([3.0, 1.0, 2.0]))[:2] == (1.0, 3.0)


def test_benjamini_hochberg() -> None:
    q = benjamini_hochberg(np.array([0.01, 0.04, 0.03, np.nan, 0.5]))
    # by hand: p x m / rank = 0.04, 0.06, 0.0533, then the running minimum from the top
    assert q[:3] == pytest.approx([0.04, 0.16 / 3, 0.16 / 3])
    assert np.isnan(q[3])
    assert q[4] == pytest.approx(0.5)


def test_exit_1_on_regression_with_kernels_labelling_sides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, cand = _runs(tmp_path, throughput=0.9)
    assert run_command("harness.compare", ["compare", str(base), str(cand)]) == 1
    out = capsys.readouterr().out
    assert "base 6.1.0-base" in out and "candidate 6.18.0-cand" in out
    assert "| regression |" in out
    assert "cold_conns=500, offered_rate_rps=1000" in out


def test_exit_0_without_regression(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, cand = _runs(tmp_path)
    assert run_command("harness.compare", ["compare", str(base), str(cand)]) == 0
    out = capsys.readouterr().out
    assert "0 regression(s)" in out and "| ~ |" in out


def test_html_report_to_file(tmp_path: Path) -> None:
    base, cand = _runs(tmp_path, latency=1.5)
    out = tmp_path / "report.html"
    argv = ["compare", str(base), str(cand), "--format", "html", "--out", str(out),
            "--metric", "resp_time_mean_ms"]
    assert run_command("harness.compare", argv) == 1
    text = out.read_text()
    assert "<table" in text and "regression" in text and "resp_time_mean_ms" in text


def test_warning_below_five_repetitions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, cand = _runs(tmp_path, repetitions=3)
    run_command("harness.compare", ["compare", str(base), str(cand)])
    err = capsys.readouterr().err
    assert "only 3 repetition(s)" in err
    assert "min-max range: 75% coverage" in err
    assert "cycles_per_packet is estimated" in err  # synthetic runs have no counters


def test_exit_2_for_different_scenarios(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = write_run(tmp_path, make_points(SCENARIO, GRID_20, repetitions=2))
    other = write_run(tmp_path, make_points("bm98-ufalloc", repetitions=2))
    assert run_command("harness.compare", ["compare", str(base), str(other)]) == 2
    err = capsys.readouterr().err
    assert "different scenario_name" in err and SCENARIO in err and "bm98-ufalloc" in err


def test_exit_2_for_different_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write_run(tmp_path / "a", make_points(SCENARIO, GRID_20, repetitions=2))
    newer = write_run(tmp_path / "b", make_points(SCENARIO, GRID_20, repetitions=2),
                      schema_version=2)
    assert run_command("harness.compare", ["compare", str(base), str(newer)]) == 2
    assert "schema_version 2" in capsys.readouterr().err


@pytest.mark.parametrize("problem", ["missing", "unknown-metric", "two-runs", "bad-effect"])
def test_exit_2_usage_errors(tmp_path: Path, problem: str) -> None:
    base, cand = _runs(tmp_path, repetitions=2)
    argv = {
        "missing": ["compare", str(base), str(tmp_path / "nope")],
        "unknown-metric": ["compare", str(base), str(cand), "--metric", "events_per_dispatch"],
        "two-runs": ["compare", str(tmp_path), str(cand)],
        "bad-effect": ["compare", str(base), str(cand), "--min-effect", "5"],
    }[problem]
    try:
        code = run_command("harness.compare", argv)
    except SystemExit as exc:  # argparse rejects bad option values itself, with exit 2
        code = exc.code
    assert code == 2


def test_wanbench_entry_point_exit_code(tmp_path: Path) -> None:
    base, cand = _runs(tmp_path, throughput=0.9)
    done = subprocess.run([sys.executable, "-m", "harness.cli", "compare", str(base), str(cand),
                           "--metric", "reply_rate_rps"], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 1, done.stderr
    assert "20 regression(s)" in done.stdout
