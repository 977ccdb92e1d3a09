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


def _wanbench(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=60)


SCENARIOS = Path(__file__).parents[2] / "scenarios"


@pytest.mark.parametrize(("setting", "blamed"), [
    # a rule over two fields of the file's `cpus:` section, broken by a --set in it
    ("cpus.server=7", "--set 'cpus.server=7' (in quickstart.yaml:21): cpus: server CPU 7"),
    ("cpus.generator=0", "--set 'cpus.generator=0' (in quickstart.yaml:21): cpus: server "
                         "and generator must be pinned to different CPUs"),
    ("hot.conns=abc", "--set 'hot.conns=abc': hot.conns: wants a whole number (got 'abc')"),
])
def test_an_error_a_set_made_is_blamed_on_the_set(tmp_path: Path, setting: str, blamed: str):
    done = _wanbench("run", "quickstart.yaml", "--set", setting, "--out", str(tmp_path),
                     cwd=SCENARIOS)
    assert done.returncode == 2
    assert done.stderr == f"wanbench run: {blamed}" + done.stderr.split(blamed, 1)[1]
    assert "Input should" not in done.stderr and done.stderr.count("\n") == 1


def test_the_file_alone_is_still_blamed_on_its_line(tmp_path: Path):
    """The other direction: a --set elsewhere does not take the blame for the file's error."""
    (tmp_path / "same.yaml").write_text("name: s\ncpus: {server: 0, generator: 0}\n")
    done = _wanbench("run", "same.yaml", "--set", "hot.conns=5", "--out", str(tmp_path),
                     cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("wanbench run: same.yaml:2: cpus: server and generator")


def test_a_scenario_named_without_yaml_is_offered_the_file(tmp_path: Path):
    done = _wanbench("run", "quickstart", "--out", str(tmp_path), cwd=SCENARIOS)
    assert done.returncode == 2
    assert done.stderr == "wanbench run: no scenario quickstart; did you mean quickstart.yaml?\n"
    done = _wanbench("run", "no-such-scenario", "--out", str(tmp_path), cwd=SCENARIOS)
    assert done.returncode == 2 and "did you mean" not in done.stderr


def test_an_unknown_command_is_offered_the_nearest():
    done = _wanbench("plto")
    assert done.returncode == 2
    assert done.stderr.startswith("wanbench: no command 'plto'; commands: server, load,")
    assert "did you mean plot?" in done.stderr and done.stderr.count("\n") == 1
    assert "did you mean" not in _wanbench("zzzzzz").stderr


def _refused_with_pandas(argv: list[str]) -> tuple[list[str], str]:
    """`wanbench run ARGV` in a fresh interpreter: its status and whether it imported pandas,
    and what it printed on standard error."""
    done = subprocess.run(
        [sys.executable, "-c", "import sys\nfrom harness.cli import main\n"
         f"status = main({['run', *argv]!r})\nprint(status, 'pandas' in sys.modules)"],
        cwd=Path(__file__).parents[2], capture_output=True, text=True, timeout=60)
    return done.stdout.split(), done.stderr


def test_a_scenario_that_does_not_load_is_refused_before_pandas_is_imported(tmp_path: Path):
    # the runner's imports (pandas, pyarrow) are half a second of a refusal's time here
    scenario = tmp_path / "bad.yaml"
    scenario.write_text("name: bad\nbogus: 1\n")
    said, err = _refused_with_pandas([str(scenario), "--out", str(tmp_path / "out")])
    assert said == ["2", "False"] and "bogus: unknown field" in err, err
    # what only the runner can refuse (a run directory to resume) it refuses, having imported
    said, err = _refused_with_pandas(["--resume", str(tmp_path)])
    assert said == ["2", "True"] and "manifest.json" in err, err
