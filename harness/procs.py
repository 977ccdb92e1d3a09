"""Child processes that die with the harness, started from argument lists, stopped politely."""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from harness import monotonic

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


# A command run under this prefix lives in a new PID namespace whose first process is a
# small shell: when that shell dies the kernel kills everything in the namespace (nginx
# workers, wb-server workers), and --kill-child kills the shell when unshare dies, so a
# SIGKILLed runner leaves no orphan behind. The shell, not the command, is the namespace's
# init because an init ignores every signal it has no handler for: a server without a
# SIGTERM handler would not stop. It passes SIGTERM/SIGINT on and exits with the command.
# (The trap in single quotes: its $c is the command's pid when the trap runs, not the empty
# value it had when the trap was set.)
_INIT = ("trap 'kill -TERM $c 2>/dev/null' TERM INT; \"$@\" & c=$!; "
         "while :; do wait $c; s=$?; kill -0 $c 2>/dev/null || exit $s; done")
CONTAINED = ["unshare", "--pid", "--fork", "--kill-child", "sh", "-c", _INIT, "wanbench-init"]


def die_with_parent() -> None:
    """preexec_fn: SIGKILL of the harness must not leave servers and generators behind;
    ip netns exec, unshare, prlimit and taskset exec() their command, which keeps this."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


async def spawn(argv: list[str], *, stdout: int | IO[bytes] | None = None,
                stderr: int | IO[bytes] | None = None, cwd: Path | None = None,
                stdin: int = asyncio.subprocess.DEVNULL,
                pass_fds: tuple[int, ...] = ()) -> asyncio.subprocess.Process:
    """A child in a process group of its own (the runner signals the group, so whatever it
    forks stops with it) that dies with the harness.

    Cancelled while the child is being set up (a stop signal), the caller never gets the
    child, so it could not stop it: its group is killed here. Waiting for the harness's exit
    is not enough: a child that forks at once (unshare) may not have armed its own children's
    parent-death signal yet."""
    creating = asyncio.ensure_future(asyncio.create_subprocess_exec(
        *argv, stdin=stdin, stdout=stdout, stderr=stderr,
        cwd=cwd, preexec_fn=die_with_parent, process_group=0, pass_fds=pass_fds))
    try:
        return await asyncio.shield(creating)
    except asyncio.CancelledError:
        proc = await creating
        _signal_group(proc.pid, signal.SIGKILL)
        await proc.wait()
        raise


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False


async def stop(proc: asyncio.subprocess.Process, sig: int = signal.SIGTERM,
               timeout: float = 10.0) -> int:
    """Send sig to the child's process group, wait up to timeout, then SIGKILL the group;
    returns the child's exit status. Members left by a child that already exited (a server's
    workers) are stopped too."""
    if proc.returncode is not None:
        _signal_group(proc.pid, signal.SIGKILL)
        return proc.returncode
    _signal_group(proc.pid, sig)
    try:
        status = await monotonic.within(proc.wait(), timeout)
    except TimeoutError:
        status = None
    _signal_group(proc.pid, signal.SIGKILL)
    return status if status is not None else await proc.wait()


def _only_child(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as children:
            found = children.read().split()
    except OSError:
        return None
    return int(found[0]) if len(found) == 1 else None


def contained_pid(pid: int) -> int | None:
    """The command's own pid under CONTAINED started as pid; None once it has exited."""
    init = _only_child(pid)
    return None if init is None else _only_child(init)


@contextmanager
def forwarding_signals(start: Callable[[], subprocess.Popen], signals: tuple[int, ...],
                       send: int | None = None) -> Iterator[subprocess.Popen]:
    """A foreground child started by start(), these signals passed on to it (as `send`, or
    as themselves) for as long as it runs: the handlers go in before it starts, and one that
    comes before it exists is passed on once it does, so none falls to the handler before
    (which would stop the caller, not the child). On the way out the handlers are restored
    and the child never left behind."""
    proc: subprocess.Popen | None = None
    early: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        if proc is None:
            early.append(signum)
        else:
            proc.send_signal(send or signum)

    previous = {sig: signal.signal(sig, forward) for sig in signals}
    try:
        proc = start()
        for signum in early:
            proc.send_signal(send or signum)
        yield proc
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
