"""A stop signal during blocking bring-up raises Interrupted, even when it first lands where
Python ignores exceptions."""

from __future__ import annotations

import signal
import sys
import time

import pytest

from harness import interrupts


class RaisesWhenDropped:
    def __del__(self) -> None:
        # what happened when SIGINT arrived inside logging's after-fork hook of a subprocess
        # spawn: the handler's Interrupted was printed as "Exception ignored" and lost
        raise interrupts.Interrupted(signal.SIGINT)


def test_an_interrupt_raised_where_python_ignores_exceptions_is_delivered_again():
    hook = sys.unraisablehook
    with pytest.raises(interrupts.Interrupted) as stopped:
        with interrupts.raising():
            RaisesWhenDropped()  # dropped at once
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                time.sleep(0.001)
    assert stopped.value.signum == signal.SIGINT and stopped.value.exit_status == 130
    assert sys.unraisablehook is hook  # restored on the way out


def test_other_unraisable_exceptions_still_reach_the_previous_hook(monkeypatch):
    seen: list[BaseException] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda args: seen.append(args.exc_value))

    class Fails:
        def __del__(self) -> None:
            raise ValueError("ordinary")

    with interrupts.raising():
        Fails()
    assert [type(e) for e in seen] == [ValueError]


def test_a_second_stop_signal_does_not_cut_the_teardown_short():
    """Ctrl-C twice, or a re-delivered signal, while `except: teardown(); raise` runs."""
    torn_down = []
    with pytest.raises(interrupts.Interrupted):
        with interrupts.raising():
            try:
                signal.raise_signal(signal.SIGINT)
            except interrupts.Interrupted:
                signal.raise_signal(signal.SIGTERM)  # arrives during the teardown
                torn_down.append(True)
                raise
    assert torn_down == [True]
