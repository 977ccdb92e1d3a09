"""Malformed scenarios: each names file:line, the field and what is allowed, and exits 2."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.scenario import ScenarioError, parse

MALFORMED = sorted((Path(__file__).parent / "malformed").glob("*.yaml"))


def test_there_are_at_least_ten_fixtures():
    assert len(MALFORMED) >= 10


@pytest.mark.parametrize("scenario", MALFORMED, ids=lambda p: p.stem)
def test_malformed_scenario_is_refused_with_its_message(scenario: Path, tmp_path: Path):
    expected = scenario.with_suffix(".expected").read_text().strip()
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", scenario.name, "--out", str(tmp_path)],
        cwd=scenario.parent, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    message = " ".join(done.stderr.split())
    assert " ".join(expected.split()) in message
    assert not any(tmp_path.iterdir()), "a refused scenario must not create a run directory"


def test_bad_set_override_is_refused(tmp_path: Path):
    scenario = Path(__file__).parents[2] / "scenarios" / "quickstart.yaml"
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", str(scenario), "--out", str(tmp_path),
         "--set", "server.dispatch=kqueue"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "server.dispatch" in done.stderr and "epoll" in done.stderr and "kqueue" in done.stderr


def test_missing_generator_tool_is_refused_before_anything_starts(tmp_path: Path):
    if shutil.which("wrk2"):
        pytest.skip("wrk2 is installed here: nothing to refuse")
    scenario = tmp_path / "wants-wrk2.yaml"
    scenario.write_text("name: wants-wrk2\nhot: {generator: wrk2}\n")
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(scenario), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "hot.generator wrk2 is not on PATH" in done.stderr
    assert "use hot.generator: sclient" in done.stderr
    # wrk2 has no package: the fix says how to build it, and under which name
    assert "github.com/giltene/wrk2" in done.stderr and "/usr/local/bin/wrk2" in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_bad_value_in_a_sweep_list_is_blamed_on_its_own_line():
    text = ("name: s\nsweep:\n  server.dispatch:\n    - select\n    - epol\n"
            "  cold.conns: {start: 0, stop: 10, step: 10}\n")
    with pytest.raises(ScenarioError) as caught:
        parse(text, "mine.yaml")
    assert str(caught.value).startswith(
        "mine.yaml:5: sweep point server.dispatch='epol', cold.conns=0: server.dispatch: "
        "dispatch 'epol' is not one of")
    # a range has no line per value: its axis is blamed
    with pytest.raises(ScenarioError, match=r"^mine.yaml:6: sweep point .*cold.conns=-10"):
        parse(text.replace("start: 0", "start: -10").replace("- epol", "- epoll"), "mine.yaml")
