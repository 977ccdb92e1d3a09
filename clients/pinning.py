"""Pinning to CPUs from outside a program: the one place the `taskset` prefix is written, and
where a running process (every one of its threads) is moved.

For programs without an affinity option of their own: the external load tools (wrk,
httperf), servers the runner starts by command (nginx), and the link emulator, which must
stay off the server's CPU. wb-server, wb-sclient and asyncgen pin themselves (--cpu)."""

from __future__ import annotations

import os
from collections.abc import Callable


def pin_argv(cpu: int | None) -> list[str]:
    """The argv prefix that runs a command on CPU `cpu`; nothing when cpu is None."""
    return [] if cpu is None else pin_set_argv({cpu})


def pin_set_argv(cpus: set[int]) -> list[str]:
    """The argv prefix that runs a command on any of `cpus`."""
    return ["taskset", "-c", ",".join(map(str, sorted(cpus)))]


def pin_running(pid: int, cpus: set[int]) -> None:
    """Moves every thread of a running process to `cpus` (sched_setaffinity acts on one
    thread, and threads started before it keep their own mask)."""
    _each_thread(pid, lambda tid: os.sched_setaffinity(tid, cpus))


def set_idle(pid: int, idle: bool) -> None:
    """Every thread of a running process to SCHED_IDLE (it runs only when its CPUs have
    nothing else to run, and a waking generator preempts it at once), or back to normal."""
    policy = os.SCHED_IDLE if idle else os.SCHED_OTHER
    _each_thread(pid, lambda tid: os.sched_setscheduler(tid, policy, os.sched_param(0)))


def _each_thread(pid: int, act: Callable[[int], None]) -> None:
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            act(int(tid))
        except ProcessLookupError:
            continue  # a thread that ended meanwhile


def all_but(cpu: int) -> set[int]:
    """Every CPU this process may use except `cpu` (what runs beside a pinned server)."""
    return os.sched_getaffinity(0) - {cpu}
