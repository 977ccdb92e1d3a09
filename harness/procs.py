"""Child processes that die with the harness, started from argument lists, stopped politely."""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> None:
    # SIGKILL of the harness must not leave servers and generators behind; ip netns exec
    # and taskset exec() their command, which keeps this setting.
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


async def spawn(argv: list[str], *, stdout: int | IO[bytes] | None = None,
                stderr: int | IO[bytes] | None = None,
                cwd: Path | None = None) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=stdout, stderr=stderr,
        cwd=cwd, preexec_fn=_die_with_parent)


async def stop(proc: asyncio.subprocess.Process, sig: int = signal.SIGTERM,
               timeout: float = 10.0) -> int:
    """Send sig, wait up to timeout, then SIGKILL; returns the exit status."""
    if proc.returncode is not None:
        return proc.returncode
    try:
        proc.send_signal(sig)
        return await asyncio.wait_for(proc.wait(), timeout)
    except ProcessLookupError:
        return await proc.wait()
    except TimeoutError:
        proc.kill()
        return await proc.wait()


def pin_argv(cpu: int | None) -> list[str]:
    """Prefix that pins a command to one CPU (taskset), or nothing."""
    if cpu is None:
        return []
    if cpu >= (os.cpu_count() or 1):
        raise ValueError(f"CPU {cpu} does not exist (this machine has {os.cpu_count()} CPUs)")
    return ["taskset", "-c", str(cpu)]


@contextmanager
def forwarding_signals(proc: subprocess.Popen, signals: tuple[int, ...],
                       send: int | None = None) -> Iterator[None]:
    """While a foreground child runs, pass these signals on to it (as `send`, or as
    themselves); on the way out restore the handlers and never leave the child behind."""
    def forward(signum: int, _frame: object) -> None:
        proc.send_signal(send or signum)

    previous = {sig: signal.signal(sig, forward) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
