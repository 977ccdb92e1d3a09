"""Loading run directories: tidy frames, schema checks, errors that name the file and column."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from harness.results.format import ResultsFormatError
from harness.results.runset import find_runs, read_runs

from .synthetic import make_points, write_run

SCENARIO = "bmd99-fig8-reply-rate-vs-cold"


def test_loads_points_and_long_tables(tmp_path: Path) -> None:
    run = write_run(tmp_path, make_points(SCENARIO, repetitions=2))
    runs = read_runs([run])
    assert runs.manifests.loc[0, "scenario_name"] == SCENARIO
    assert runs.manifests.loc[0, "kernel_release"] == "6.18.0-synthetic"
    assert len(runs.points) == 3 * 2 * 2  # cold conns x dispatch x repetitions
    assert set(runs.profiles["layer"]) >= {"syscall", "tcp", "user"}
    assert set(runs.timeseries["source"]) == {"generator", "server_proc"}
    assert set(runs.histograms["kind"]) == {"corrected", "uncorrected"}


def test_records_alone_give_the_same_tables(tmp_path: Path) -> None:
    points = make_points(SCENARIO, repetitions=2)
    from_parquet = read_runs([write_run(tmp_path / "a", points)])
    from_records = read_runs([write_run(tmp_path / "b", points, with_parquet=False)])
    for table in ("points", "timeseries", "histograms", "profiles"):
        assert len(getattr(from_parquet, table)) == len(getattr(from_records, table)), table
    assert sorted(from_parquet.points["reply_rate_rps"]) == pytest.approx(
        sorted(from_records.points["reply_rate_rps"])
    )
    assert from_parquet.profiles["pct"].sum() == pytest.approx(from_records.profiles["pct"].sum())


def test_missing_manifest_is_named(tmp_path: Path) -> None:
    run = write_run(tmp_path, make_points(SCENARIO, repetitions=1))
    (run / "manifest.json").unlink()
    with pytest.raises(ResultsFormatError, match="manifest.json: missing"):
        read_runs([run])


@pytest.mark.parametrize(("table", "column"), [("points", "cold_conns"), ("profiles", "layer")])
def test_missing_column_is_named_with_its_file(tmp_path: Path, table: str, column: str) -> None:
    run = write_run(tmp_path, make_points(SCENARIO, repetitions=1))
    path = run / f"{table}.parquet"
    pd.read_parquet(path).drop(columns=[column]).to_parquet(path, index=False)
    with pytest.raises(ResultsFormatError, match=rf"{table}.parquet: missing column\(s\) {column}"):
        read_runs([run])


def test_run_without_points_is_refused(tmp_path: Path) -> None:
    run = write_run(tmp_path, make_points(SCENARIO, repetitions=1), with_parquet=False)
    for record in (run / "points").iterdir():
        record.unlink()
    with pytest.raises(ResultsFormatError, match="no finished points"):
        read_runs([run])


def test_folder_of_runs_and_scenario_subset(tmp_path: Path) -> None:
    write_run(tmp_path, make_points(SCENARIO, repetitions=1))
    write_run(tmp_path, make_points("bm98-ufalloc", repetitions=1))
    assert len(find_runs(tmp_path)) == 2
    runs = read_runs([tmp_path])
    subset = runs.scenario("bm98-ufalloc")
    assert list(subset.manifests["scenario_name"]) == ["bm98-ufalloc"]
    assert set(subset.points["scenario"]) == {"bm98-ufalloc"}
    assert set(subset.profiles["run_id"]) == set(subset.manifests["run_id"])


def test_manifest_must_be_json(tmp_path: Path) -> None:
    run = write_run(tmp_path, make_points(SCENARIO, repetitions=1))
    (run / "manifest.json").write_text("{not json")
    with pytest.raises(ResultsFormatError, match="manifest.json: not valid JSON"):
        read_runs([run])


@pytest.mark.parametrize("cpus,budget", [({"server_budget_pct": 20.0, "budget_period_us": 5000},
                                          20.0), ({"server": 0}, None)])
def test_a_budget_fixed_by_the_scenario_becomes_a_column(tmp_path: Path, cpus, budget) -> None:
    # Only sweep axes are parameter columns; the budget the server's CPU and idle time are
    # judged against must reach the analysis even when the scenario fixed it.
    run = write_run(tmp_path, make_points("bm98-fig9-saturation-vs-cold", repetitions=1))
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["scenario"]["cpus"] = cpus
    (run / "manifest.json").write_text(json.dumps(manifest))
    points = read_runs([run]).points
    if budget is None:
        assert "server_budget_pct" not in points.columns
    else:
        assert set(points["server_budget_pct"]) == {budget}
        assert set(points["budget_period_us"]) == {5000}
