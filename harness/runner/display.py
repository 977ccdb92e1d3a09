"""How a run tells people what it does: lines as it goes, a progress count over its point ×
repetitions, and its outcome at the end. `wanbench run` shows them on its terminal (rich's
bar, the summary table); a run in a child process writes plain lines (PlainDisplay)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Protocol

from harness.analysis.summary import reason_lines
from harness.runner.outcome import RunResult

Advance = Callable[[], None]  # one more point × repetition recorded


class RunDisplay(Protocol):
    def info(self, line: str) -> None: ...

    def warning(self, line: str) -> None: ...

    def progress(self, total: int) -> AbstractContextManager[Advance]:
        """Shown while the run's total point × repetitions are measured."""
        ...

    def outcome(self, result: RunResult) -> None:
        """The finished (or stopped) run, once its summary.json is written."""
        ...


class PlainDisplay:
    """One line per event on standard error, then the invalid repetitions' reasons and the
    run directory: a run whose output is read from a pipe or a guest's console."""

    def info(self, line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    warning = info

    @contextlib.contextmanager
    def progress(self, total: int) -> Iterator[Advance]:
        yield lambda: None  # each recorded point has its own line already

    def outcome(self, result: RunResult) -> None:
        for line in reason_lines(result.summaries):
            self.info(f"invalid {line}")
        if result.stop is not None:
            self.info(f"{result.stop.reason}: {result.finished} of {result.total} finished "
                      f"points kept in {result.run_dir}")
        else:
            self.info(f"results: {result.run_dir}")
