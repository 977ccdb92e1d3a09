"""A stop signal during blocking bring-up raises Interrupted, even when it first lands where
Python ignores exceptions; and `wanbench` exits 130/143 on one from its first line on."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import interrupts
from harness.monotonic import within
from harness.runner.scenario_run import until_stopped
from tests.conftest import REPO


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


def _discarded(sig: int) -> None:
    """A stop signal whose Interrupted is discarded where it is raised, as C code that clears
    the error of the Python it called (PyObject_HasAttr, a dict lookup's __eq__) discards it."""
    try:
        signal.raise_signal(sig)
    except interrupts.Interrupted:
        pass


def test_a_stop_signal_whose_interrupted_was_discarded_stops_the_next_bring_up():
    with pytest.raises(interrupts.Interrupted) as stopped:
        with interrupts.raising():
            _discarded(signal.SIGTERM)
            with interrupts.raising():
                pytest.fail("the bring-up went on after a stop signal")
    assert stopped.value.signum == signal.SIGTERM
    # the other way: the signal belonged to that scope; a new one starts with none heard
    entered = []
    with interrupts.raising():
        with interrupts.raising():
            entered.append(True)
    assert entered == [True] and interrupts.heard() is None


@pytest.mark.parametrize("lost", [False, True], ids=["no signal", "signal discarded"])
def test_the_runs_event_loop_stops_for_a_signal_whose_interrupted_was_discarded(lost: bool):
    ran: list[bool] = []

    async def work() -> None:
        ran.append(True)

    with interrupts.raising():
        if lost:
            _discarded(signal.SIGTERM)
        stop = until_stopped(work)
    if lost:
        assert stop is not None and stop.status == 143 and not ran
    else:
        assert stop is None and ran == [True]


async def _cancelled_as_it_finishes(wait) -> str:
    """A task waiting through `wait` is cancelled (a stop signal) in the loop iteration in
    which what it waits for gets its result, as a stop can land as a server answers."""
    answer = asyncio.get_running_loop().create_future()

    async def waiting() -> str:
        await wait(answer, 10)
        await asyncio.sleep(0)
        return "went on"

    task = asyncio.create_task(waiting())
    await asyncio.sleep(0)  # the task now waits
    answer.set_result("line")
    task.cancel()
    try:
        return await task
    except asyncio.CancelledError:
        return "stopped"


def test_a_stop_that_lands_as_the_awaited_finishes_is_kept():
    assert asyncio.run(_cancelled_as_it_finishes(within)) == "stopped"
    if sys.version_info < (3, 12):  # what the runner used to wait with dropped it
        assert asyncio.run(_cancelled_as_it_finishes(asyncio.wait_for)) == "went on"


def test_within_gives_the_result_or_times_out():
    async def answered() -> str:
        return "line"

    assert asyncio.run(within(answered(), 1)) == "line"
    assert asyncio.run(within(answered(), None)) == "line"
    with pytest.raises(TimeoutError):
        asyncio.run(within(asyncio.sleep(10), 0.01))


def catches(pid: int, sig: int) -> bool:
    """Whether the process has a handler for sig (its SigCgt mask in /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & (1 << (sig - 1)))
    return False


def wait_until_handling_sigterm(proc: subprocess.Popen) -> str:
    """Waits until the process handles SIGTERM (Python never does by itself, so that is
    wanbench's own first line); returns its memory map at that moment (stopped to read it)."""
    deadline = time.monotonic() + 20
    while proc.poll() is None and not catches(proc.pid, signal.SIGTERM):
        assert time.monotonic() < deadline, "wanbench never handled SIGTERM"
        time.sleep(0.0005)
    proc.send_signal(signal.SIGSTOP)
    try:
        return Path(f"/proc/{proc.pid}/maps").read_text()
    finally:
        proc.send_signal(signal.SIGCONT)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_a_stop_signal_while_importing_exits_with_its_status(sig: int, tmp_path: Path):
    """Sent as soon as wanbench handles signals, which is before its imports (no pydantic
    loaded yet), then later in the ~1.5 s of imports. Before: stop signals were handled only
    once the run's event loop started; in the imports SIGINT printed a KeyboardInterrupt
    traceback and died by the signal, SIGTERM died silently. (Before the interpreter runs any
    of wanbench the kernel ends it by the signal, which a shell reports as 130/143 too.)"""
    for delay_s in (0, 0, 0, 0.02, 0.1, 0.3, 0.6):
        proc = subprocess.Popen(
            [sys.executable, "-m", "harness.cli", "run", "scenarios/quickstart.yaml", "--out",
             str(tmp_path / "out")], cwd=REPO, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True)
        maps = wait_until_handling_sigterm(proc)
        assert "pydantic_core" not in maps, "stop signals are handled only after the imports"
        time.sleep(delay_s)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 128 + sig, (delay_s, stderr[-2000:])
        assert "Traceback" not in stderr, delay_s
        reason = "interrupted" if sig == signal.SIGINT else "terminated"
        assert reason in stderr.strip().splitlines()[-1], (delay_s, stderr[-2000:])


def test_wanbench_handles_stop_signals_before_importing_any_command():
    """Everything imported before main() installs the handlers is time in which SIGTERM kills
    wanbench by the signal and SIGINT prints a traceback: harness.cli's own imports are the
    interpreter's and harness.interrupts, nothing of a command's (harness.commands pulled in
    rich: 0.3 s on a loaded machine)."""
    done = subprocess.run(
        [sys.executable, "-c", "import sys, harness.cli; print(' '.join(sorted(m for m in "
                               "sys.modules if m.split('.')[0] in ('harness', 'rich'))))"],
        cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["harness", "harness.cli", "harness.interrupts"]
