"""`wanbench reproduce --run`: every scenario from one revision into one folder, older runs
replaced only when all finished, the time recorded; --quick shrinks sweeps, not columns."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from harness.reproduce import beyond
from harness.reproduce import run as reproduce_run
from harness.reproduce.run import ReproduceError, plan, quick_overrides, reproduce
from harness.results.runset import find_runs
from harness.scenario import load, points
from tests.conftest import REPO, build, needs_root
from tests.runner.test_run import WANBENCH

CPP5 = "cpp-fig5-cpp-vs-connections"


def test_quick_keeps_each_axis_column_at_its_first_level():
    path = REPO / "scenarios/cpp-fig6-cpp-vs-latency.yaml"
    (point,) = points(load(path, quick_overrides(path)))
    assert point.columns["one_way_delay_ms"] == 0
    (run,) = plan([path], quick=True)
    assert (run.points, run.repetitions) == (1, 1)


def test_quick_runs_put_the_scenarios_of_one_topology_together_in_their_order():
    papers = reproduce_run.papers_paths()
    grouped = reproduce_run.grouped_by_topology(papers)
    topology = {path: load(path).topology for path in papers}
    runs = [topology[path] for path in grouped]
    # each topology in one stretch, the topologies in the order they first come
    stretches = [t for i, t in enumerate(runs) if i == 0 or t != runs[i - 1]]
    assert stretches == [t for i, t in enumerate(topology.values())
                         if t not in list(topology.values())[:i]]
    # within a topology, the scenarios keep their order; the loopback ones moved up
    for each in stretches:
        assert [p for p in grouped if topology[p] == each] == [p for p in papers
                                                              if topology[p] == each]
    assert sorted(grouped) == sorted(papers) and grouped != papers


def test_the_papers_targets_fit_the_budget_by_their_own_estimate():
    papers = plan(reproduce_run.papers_paths(), quick=False)
    assert len(papers) == 16 and all(r.repetitions >= 3 for r in papers)
    assert sum(r.estimate_s for r in papers) <= reproduce_run.REPRODUCE_BUDGET_S
    # the sweeps beyond the papers are named by --only (`make beyond`), never run by default
    known = [path.stem for path in reproduce_run.scenario_paths()]
    assert known[16:] == list(beyond.SCENARIOS)


def test_uncommitted_changes_are_refused_unless_allowed(monkeypatch, tmp_path):
    monkeypatch.setattr(reproduce_run, "git_revision", lambda: "abc123-dirty")
    with pytest.raises(ReproduceError, match="uncommitted changes"):
        reproduce(tmp_path, only=[CPP5])
    assert not any(tmp_path.iterdir())  # refused before anything ran


def test_an_unknown_scenario_is_refused(tmp_path):
    with pytest.raises(ReproduceError, match="unknown scenario; known: bm98-fig1"):
        reproduce(tmp_path, allow_dirty=True, only=["nope"])


def test_only_keeps_the_other_scenarios_entries_with_their_revision(monkeypatch, tmp_path):
    other = "bm98-fig1-select-cpu-vs-cold"
    (tmp_path / "reproduce.json").write_text(json.dumps({
        "revision": "old", "quick": False, "scenarios": [
            {"scenario": name, "points": 1, "repetitions": 3, "estimate_s": 1.0,
             "seconds": 1.0, "exit_code": 0, "run_dir": f"{name}/x"} for name in (other, CPP5)]}))
    monkeypatch.setattr(reproduce_run, "git_revision", lambda: "new")
    monkeypatch.setattr(reproduce_run, "_run_one", lambda *_: (0, None))
    summary = reproduce(tmp_path, only=[CPP5], log=lambda _: None)
    by_name = {entry["scenario"]: entry for entry in summary["scenarios"]}
    assert by_name[other]["revision"] == "old" and by_name[other]["run_dir"] == f"{other}/x"
    assert by_name[CPP5]["revision"] == "new" and by_name[CPP5]["run_dir"] is None
    assert summary["revisions"] == ["new", "old"] and summary["revision"] == "new"
    # a run of every scenario keeps nothing of the earlier record
    monkeypatch.setattr(reproduce_run, "papers_paths", lambda: [REPO / f"scenarios/{CPP5}.yaml"])
    summary = reproduce(tmp_path, log=lambda _: None)
    assert [e["scenario"] for e in summary["scenarios"]] == [CPP5]
    assert summary["revisions"] == ["new"]


@needs_root
def test_a_finished_run_replaces_older_runs_and_a_failed_one_keeps_them(monkeypatch, tmp_path):
    build("build/bin/wb-sclient")
    build("build/bin/wb-server")
    first = reproduce(tmp_path, quick=True, allow_dirty=True, only=[CPP5], log=lambda _: None)
    second = reproduce(tmp_path, quick=True, allow_dirty=True, only=[CPP5], log=lambda _: None)
    assert first["finished"] and second["finished"]
    (kept,) = find_runs(tmp_path / CPP5)
    assert str(kept) == second["scenarios"][0]["run_dir"]
    summary = json.loads((tmp_path / "reproduce.json").read_text())
    assert summary["seconds"] > 0 and summary["scenarios"][0]["exit_code"] in (0, 1)
    # A scenario that could not run (exit 2) stops the sweep and replaces nothing.
    monkeypatch.setattr(reproduce_run, "_run_one", lambda *_: (2, None))
    third = reproduce(tmp_path, quick=True, allow_dirty=True, only=[CPP5], log=lambda _: None)
    assert not third["finished"]
    assert find_runs(tmp_path / CPP5) == [Path(kept)]


@needs_root
@pytest.mark.slow
def test_quick_pipeline_runs_every_scenario_and_judges_every_target(tmp_path):
    """make reproduce-quick's pipeline, as CI's smoke test: one short point per scenario."""
    for name in ("wb-server", "wb-sclient", "wb-linkem"):
        build(f"build/bin/{name}")
    out = tmp_path / "quick"
    done = subprocess.run([*WANBENCH, "reproduce", "--run", "--quick", "--allow-dirty",
                           "--check", str(out)], cwd=REPO, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    summary = json.loads((out / "reproduce.json").read_text())
    assert summary["finished"] and len(summary["scenarios"]) == 16
    verdicts = [ln.split("  ")[0] for ln in done.stdout.splitlines()
                if re.match(r"^(PASS|FAIL|NOT RUN|NOT POSSIBLE HERE) ", ln)]
    assert len(verdicts) == 19 and "NOT RUN" not in verdicts, done.stdout[-3000:]
    # consecutive scenarios on one topology share its bring-up; another topology has its own
    instance = {m["scenario_name"]: (m["run_id"], m["topology"]["instances"][0])
                for m in map(json.loads, map(Path.read_text, out.glob("*/*/manifest.json")))}
    first_id, first = instance["bm98-fig1-select-cpu-vs-cold"]
    _, second = instance["bm98-table1-profile"]
    assert first["brought_up_by_run"] == second["brought_up_by_run"] == first_id
    assert first["prefix"] == second["prefix"]
    other_id, other = instance["cm01-fig6-9-vs-rate"]  # the cold link's delay set to 0
    assert other["brought_up_by_run"] == other_id and other["prefix"] != first["prefix"]
    plotted = subprocess.run([*WANBENCH, "plot", str(out)], cwd=REPO, capture_output=True,
                             text=True, timeout=600)
    assert plotted.returncode == 0, plotted.stderr[-3000:]
    assert (out / "index.html").is_file()


RAMPED = """
name: ramped
topology: {file: topologies/loopback.yaml}
hot: {conns: 2}
cold: {conns: 6000, ramp_rps: 1000}
sweep:
  hot.rate_rps: [100, 200, 300]
warmup_s: 1
duration_s: 1
"""


@pytest.mark.parametrize("held", [False, True])
def test_the_estimate_charges_each_cold_ramp_once_per_server(tmp_path: Path, held: bool):
    path = tmp_path / "ramped.yaml"
    path.write_text(RAMPED + f"hold_server_across_hot: {str(held).lower()}\n")
    (run,) = plan([path], quick=False)
    opened = 6000 * reproduce_run.COLD_CONN_S + 6000 / 1000  # its connections and its ramp
    points = 3 * (1 + 1 + reproduce_run.POINT_OVERHEAD_S)
    assert run.estimate_s == pytest.approx(points + opened * (1 if held else 3))
