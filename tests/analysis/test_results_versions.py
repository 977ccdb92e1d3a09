"""The results format's version (flent's way): one number, moved on each change of shape; a
run is upgraded from the version it stored by a step per version, a run that stored none is
version 1, a run of a newer version is refused, naming the fix; and a run of the current
version missing a column a validity rule reads is refused by the column's name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.results import verdict
from harness.results.compat import UPGRADES
from harness.results.format import (
    FACT_COLUMN_NAMES,
    SCHEMA_VERSION,
    STORED_POINT_COLUMNS,
    UNVERSIONED,
    ResultsFormatError,
)
from harness.results.runset import read_runs
from harness.results.store import RunDir, RunDirError

from .synthetic import make_points, write_run

SCENARIO = "bmd99-fig8-reply-rate-vs-cold"
REPO = Path(__file__).resolve().parents[2]
LATE = ("late sends: 2,000 of 160,000 scheduled sends (1.2 %) went out more than 1,000 us "
        "after their intended time; the generator fell behind")


def _edit_manifest(run: Path, edit) -> None:
    path = run / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))


def _current_points(**columns: object) -> pd.DataFrame:
    """Points as this version's recorder writes them: every declared column, null where
    not measured, and the verdict's."""
    points = make_points(SCENARIO, repetitions=1)
    absent = {name: np.nan for name in FACT_COLUMN_NAMES if name not in points}
    return points.assign(**{**absent, "invalid_codes": None, "interference_only": False,
                            **columns})


def test_every_earlier_version_has_its_step_and_every_version_its_columns():
    assert SCHEMA_VERSION == 2
    assert sorted(UPGRADES) == list(range(UNVERSIONED, SCHEMA_VERSION))
    assert sorted(STORED_POINT_COLUMNS) == list(range(UNVERSIONED, SCHEMA_VERSION + 1))


def test_a_version_1_run_is_upgraded_and_one_that_stored_no_version_is_version_1(
        tmp_path: Path):
    points = make_points(SCENARIO, repetitions=1).assign(valid=False, invalid_reason=LATE)
    stored = write_run(tmp_path / "a", points, schema_version=1)
    unversioned = write_run(tmp_path / "b", points, schema_version=1)
    _edit_manifest(unversioned, lambda m: m.pop("schema_version"))
    for run in (stored, unversioned):
        runs = read_runs([run])
        assert runs.points["invalid_codes"].eq("late_sends").all()
        assert not runs.points["interference_only"].any()
        assert runs.points["server_cpus"].notna().all()
        assert runs.manifests["schema_version"].eq(1).all()
    assert read_runs([stored]).points.equals(read_runs([unversioned]).points)


def test_a_current_run_is_read_as_it_stored_it(tmp_path: Path):
    """No step applies to the current version: what it recorded stands, even where the
    version 1 step would have derived a value (codes from its sentences)."""
    run = write_run(tmp_path, _current_points(valid=False, invalid_reason=LATE,
                                              invalid_codes="generator_crowded",
                                              interference_only=True),
                    schema_version=SCHEMA_VERSION)
    points = read_runs([run]).points
    assert points["invalid_codes"].eq("generator_crowded").all()
    assert points["interference_only"].all()
    assert "server_saturated" not in points  # not recorded, and not judged again


@pytest.mark.parametrize("column", ["steal_server_cpu_pct", "cold_held", "edge_sampler_end_ms",
                                    "invalid_codes"])
def test_a_current_run_without_a_declared_column_is_refused_by_its_name(tmp_path: Path,
                                                                        column: str):
    """Renamed (here: dropped), a column a rule reads would turn the rule off unseen."""
    run = write_run(tmp_path, _current_points().drop(columns=[column]),
                    schema_version=SCHEMA_VERSION)
    with pytest.raises(ResultsFormatError, match=rf"points.parquet: missing column\(s\) {column}$"):
        read_runs([run])


def test_a_newer_version_is_refused_naming_the_fix(tmp_path: Path):
    run = write_run(tmp_path, _current_points(), schema_version=SCHEMA_VERSION + 1)
    with pytest.raises(ResultsFormatError,
                       match=rf"schema_version {SCHEMA_VERSION + 1}, newer than this wanbench "
                             rf"reads \(versions 1 to {SCHEMA_VERSION}\).*update this one"):
        read_runs([run])


def test_the_command_line_refuses_a_newer_version_in_one_line(tmp_path: Path):
    run = write_run(tmp_path, _current_points(), schema_version=SCHEMA_VERSION + 1)
    done = subprocess.run([sys.executable, "-m", "harness.cli", "plot", str(run), "--out",
                           str(tmp_path / "figures")], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"schema_version {SCHEMA_VERSION + 1}, newer than this wanbench" in done.stderr


def test_a_run_of_an_earlier_version_is_not_resumed(tmp_path: Path):
    """Its new records would be of another shape than its own."""
    run = write_run(tmp_path, make_points(SCENARIO, repetitions=1), schema_version=1)
    with pytest.raises(RunDirError, match="schema_version 1, an earlier wanbench's.*start a new"):
        RunDir.open(run)


def test_a_missing_verdict_is_never_valid():
    points = pd.DataFrame({"valid": [True, None, False, np.nan],
                           "invalid_codes": [None, None, "steal", None],
                           "invalid_reason": [None, None, "21 % CPU steal", None],
                           "interference_only": [False, None, True, None]})
    assert verdict.valid(points).tolist() == [True, False, False, False]
    assert not verdict.valid(points.drop(columns=["valid"])).any()
    read = verdict.verdicts(points)
    assert read[2] == verdict.StoredVerdict(False, ("steal",), "21 % CPU steal", True)
    assert read[1] == verdict.StoredVerdict(False, (), None, False)
