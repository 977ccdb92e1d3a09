"""The run as a library call (harness.runner.scenario_run.run_scenario) and as a child
process (`python -m harness.runner`): a tiny loopback scenario gives its typed result, the same
summary as the run directory's summary.json; bad input is a RunRefused, or the child's one line
and status 2; the signal handlers a caller had are its own again after the run."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness.results.format import SUMMARY_FILE
from harness.runner.child import ChildFailed, ChildRun
from harness.runner.outcome import RESULT_JSON, RunRequest, RunResult, Stop
from harness.runner.refusal import EXIT_REFUSED, RunRefused
from harness.runner.scenario_run import run_scenario
from tests.conftest import REPO, build

TINY = f"""
name: tiny
topology: {{file: {REPO}/topologies/loopback.yaml}}
server: {{reply_bytes: 92}}
hot: {{generator: sclient, conns: 2, rate_rps: 200}}
sweep:
  server.dispatch: [select, epoll]
repetitions: 1
warmup_s: 0.3
duration_s: 0.5
"""


class Recorded:
    """A RunDisplay that keeps what it was told."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.totals: list[int] = []
        self.advanced = 0
        self.outcomes: list[RunResult] = []

    def info(self, line: str) -> None:
        self.lines.append(line)

    warning = info

    @contextmanager
    def progress(self, total: int) -> Iterator:
        self.totals.append(total)

        def advance() -> None:
            self.advanced += 1
        yield advance

    def outcome(self, result: RunResult) -> None:
        self.outcomes.append(result)


@pytest.fixture
def tiny(tmp_path: Path) -> RunRequest:
    build("build/bin/wb-server")
    build("build/bin/wb-sclient")
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(TINY)
    return RunRequest(scenario=scenario, out=tmp_path / "results", allow_invalid=True)


def held_to_its_run(result: RunResult) -> None:
    """The result says what the run directory holds."""
    summary = json.loads((result.run_dir / SUMMARY_FILE).read_text())
    assert result.stop is None and result.scenario_name == "tiny"
    assert (result.total, result.finished) == (2, 2)
    assert result.status == summary["exit_status"] == 0  # invalid points allowed
    assert [s.point_id for s in result.summaries] == [p["point_id"] for p in summary["points"]]
    assert sum(s.total for s in result.summaries) == 2
    assert result.run_dir.parent == result.run_dir.parent.parent / "tiny"


def test_a_run_in_process_returns_its_typed_result_and_keeps_the_callers_handlers(tiny):
    def mine(signum, frame):  # pragma: no cover - only installed, never called
        raise AssertionError

    shown = Recorded()
    before = signal.signal(signal.SIGTERM, mine)
    try:
        result = run_scenario(tiny, shown)
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, before)
    held_to_its_run(result)
    assert shown.totals == [2] and shown.advanced == 2 and shown.outcomes == [result]
    assert f"run {result.run_dir}: 2 of 2 point × repetition to measure" in shown.lines
    assert sum(" rep 0: " in line for line in shown.lines) == 2

    resumed = run_scenario(RunRequest(resume=result.run_dir), Recorded())
    assert (resumed.run_dir, resumed.total, resumed.finished) == (result.run_dir, 2, 2)


def test_a_run_in_a_child_process_returns_the_same_typed_result(tiny):
    child = ChildRun(tiny, capture=True)
    result = child.wait(timeout=120)
    held_to_its_run(result)
    assert "2 of 2 point × repetition to measure" in child.stderr
    assert f"results: {result.run_dir}" in child.stderr


def test_bad_input_is_refused_in_process_and_in_a_child(tmp_path: Path):
    missing = RunRequest(scenario=tmp_path / "none.yaml", out=tmp_path / "results")
    with pytest.raises(RunRefused, match="none.yaml"):
        run_scenario(missing, Recorded())
    with pytest.raises(RunRefused, match="no scenario given"):
        run_scenario(RunRequest(out=tmp_path / "results"), Recorded())
    child = ChildRun(missing, capture=True)
    with pytest.raises(ChildFailed, match=f"status {EXIT_REFUSED} before it began"):
        child.wait(timeout=60)
    said = child.stderr.strip().splitlines()
    assert len(said) == 1 and said[0].startswith("python -m harness.runner: ")
    assert "none.yaml" in said[0] and not (tmp_path / "results").exists()


def test_a_result_crosses_a_process_as_json_unchanged(tmp_path: Path):
    from harness.analysis.summary import PointSummary, Reason, ThresholdCheck

    point = PointSummary("p0", {"dispatch": "epoll", "cold_conns": 1000}, 1, 2,
                         {"reply_rate_rps": 999.5, "resp_time_p99_ms": None}, False,
                         [Reason(1, ["late_sends"], "late sends: 3 %")],
                         [ThresholdCheck("reply_rate_rps", ">= 900", 999.5, True)])
    result = RunResult(130, tmp_path / "run", "tiny", 4, 1, [point],
                       Stop("interrupted", 130, signal.SIGINT))
    assert RESULT_JSON.validate_json(RESULT_JSON.dump_json(result)) == result
