"""`wanbench compare` judges the in-kernel time per call and per packet, so a regression names
the call that grew; runs without kernel_trace are compared as before."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.analysis.compare.metrics import KERNEL_METRICS
from tests.analysis.compare_synthetic import make_run
from tests.analysis.conftest import run_command


def with_kernel_time(run: Path, select_ns: float, seed: int) -> Path:
    """The run's points with select's in-kernel ns per call (2 % noise per repetition) at its
    select points, null elsewhere (an epoll server makes no select call)."""
    points = pd.read_parquet(run / "points.parquet")
    noise = np.random.default_rng(seed).normal(1, 0.02, len(points))
    points["kernel_select_ns_per_call"] = pd.Series(select_ns * noise, points.index).where(
        points["dispatch"] == "select")
    points.to_parquet(run / "points.parquet")
    return run


def compared(tmp_path: Path, capsys: pytest.CaptureFixture[str], cand_select_ns: float,
             *metric: str) -> tuple[int, list[dict]]:
    """Three runs a side: the run is compare's unit, so one run a side cannot decide."""
    base = [with_kernel_time(make_run(seed=seed).write(tmp_path), 30_000.0, seed=seed)
            for seed in (1, 3, 5)]
    cand = [with_kernel_time(make_run(seed=seed, kernel="6.19.0-cand").write(tmp_path),
                             cand_select_ns, seed=seed) for seed in (2, 4, 6)]
    argv = [*map(str, base), "--", *map(str, cand), "--format", "json"]
    argv += [flag for name in metric for flag in ("--metric", name)]
    status = run_command("harness.commands.compare", ["compare", *argv])
    (candidate,) = json.loads(capsys.readouterr().out)["candidates"]
    return status, candidate["rows"]


def test_select_grown_in_the_kernel_is_a_regression_named_by_its_call(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    status, rows = compared(tmp_path, capsys, 45_000.0, "kernel_select_ns_per_call")
    assert status == 1
    assert {r["metric"] for r in rows} == {"kernel_select_ns_per_call"}
    assert len(rows) == 4  # the select points only
    assert all(r["verdict"] == "regression" for r in rows)
    assert all(r["change"] == pytest.approx(0.5, abs=0.05) for r in rows)


def test_unchanged_it_is_no_regression(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    status, rows = compared(tmp_path, capsys, 30_000.0, "kernel_select_ns_per_call")
    assert status in (0, 3)
    assert not any(r["verdict"] == "regression" for r in rows)


def test_by_default_the_kernel_metrics_measured_in_both_runs_are_compared(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    _, rows = compared(tmp_path, capsys, 45_000.0)
    kernel = {r["metric"] for r in rows} & set(KERNEL_METRICS)
    assert kernel == {"kernel_select_ns_per_call"}  # the others were not measured
    assert "reply_rate_rps" in {r["metric"] for r in rows}
