"""The signals that stop a run (SIGINT, SIGTERM) and how synchronous code hears them."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """A stop signal arrived; BaseException so that no `except Exception` swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        return 128 + self.signum  # what a shell reports for a process the signal ended

    @property
    def reason(self) -> str:
        return "interrupted" if self.signum == signal.SIGINT else "terminated"


@contextmanager
def raising() -> Iterator[None]:
    """While blocking code runs (a topology bring-up, its calibration), a stop signal raises
    Interrupted at once instead of waiting for the event loop: subprocess.run kills its child
    on the way out and every `with`/`finally` tears down what was made."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: object) -> None:
        raise Interrupted(signum)

    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
