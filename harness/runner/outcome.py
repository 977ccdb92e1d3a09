"""What a caller asks of a run (RunRequest) and what it gets back (RunResult): typed values at
the runner's boundary, the same in-process and across a child process (as JSON). A run
refused is harness.runner.refusal's."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, TypeAdapter

from clients.paths import REPO_ROOT
from harness.analysis.summary import PointSummary


class RunRequest(BaseModel):
    """A new run of a scenario file (with `--set`-style overrides), or the resumption of a
    run directory (its recorded scenario; a scenario given too must be the same)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scenario: Path | None = None
    sets: tuple[str, ...] = ()
    resume: Path | None = None
    out: Path = REPO_ROOT / "results"  # the results root a new run is made under
    backend: str | None = None  # the topology backend; None: the scenario's
    allow_invalid: bool = False  # invalid repetitions alone do not fail the run


@dataclass(frozen=True)
class Stop:
    """Why a run stopped before its last point: a stop signal, or a topology refused."""

    reason: str
    status: int
    signum: int | None = None  # the stop signal; None: not a signal


@dataclass
class RunResult:
    """A run that started: its directory, exit status, and summary (summary.json's points)."""

    status: int
    run_dir: Path
    scenario_name: str
    total: int  # point × repetitions of the scenario
    finished: int  # of them on disk
    summaries: list[PointSummary] = field(default_factory=list)
    stop: Stop | None = None
    # what every table of its points says under it: the scenario's own late-send limits
    # (harness.scenario.lateness_changes)
    notes: list[str] = field(default_factory=list)


RESULT_JSON = TypeAdapter(RunResult)  # a RunResult to and from JSON (a child's result file)
