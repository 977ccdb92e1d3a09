"""The signals that stop a run (SIGINT, SIGTERM) and how synchronous code hears them."""

from __future__ import annotations

import os
import signal
import sys
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


# The stop signal raising()'s handler has raised as Interrupted, until the outermost raising()
# ends: a second one must not cut the teardown short, and one whose Interrupted never got out
# is still known (heard()).
_heard: list[int] = []
_active: list[bool] = []  # one entry per raising() in force


def heard() -> int | None:
    """The stop signal raised as Interrupted in this raising() scope, if any. Code that starts
    new work and finds one was raised in a part that discarded it: C code that clears the
    error of the Python it called (a dict lookup's __eq__, PyObject_HasAttr), an exception
    stored in a task nobody awaits. It must stop now, or the signal is lost for good."""
    return _heard[0] if _heard else None


def raise_if_heard() -> None:
    """Interrupted again for a stop signal heard before whose exception was discarded."""
    if (signum := heard()) is not None:
        raise Interrupted(signum)


@contextmanager
def raising() -> Iterator[None]:
    """While blocking code runs (a topology bring-up, its calibration), a stop signal raises
    Interrupted at once instead of waiting for the event loop: subprocess.run kills its child
    on the way out and every `with`/`finally` tears down what was made. Entered again inside
    one whose Interrupted was discarded, it raises it again at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raise_if_heard()
    outermost = not _active
    _active.append(True)

    def stop(signum: int, _frame: object) -> None:
        if _heard:  # already stopping: a second signal must not cut the teardown short
            return
        _heard.append(signum)
        raise Interrupted(signum)

    previous_hook = sys.unraisablehook

    def swallowed(unraisable: sys.UnraisableHookArgs) -> None:
        # The handler ran where Python ignores exceptions (a fork hook of subprocess, a
        # __del__): the Interrupted would be printed and lost, and the bring-up go on.
        # Deliver the signal again a little later (sent at once, its handler would run here
        # again); the handler then raises at the main thread's next ordinary line, and should
        # it land in such a place again, this hook tries once more.
        if isinstance(unraisable.exc_value, Interrupted):
            _heard.clear()  # it did not get out: the next delivery must raise
            again = threading.Timer(0.01, os.kill, (os.getpid(), unraisable.exc_value.signum))
            again.daemon = True
            again.start()
        else:
            previous_hook(unraisable)

    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    sys.unraisablehook = swallowed
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sys.unraisablehook = previous_hook
        _active.pop()
        if outermost:
            _heard.clear()
