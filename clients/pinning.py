"""Pinning to CPUs from outside a program: the one place the `taskset` prefix is written, and
where a running process (every one of its threads) is moved.

For programs without an affinity option of their own: the external load tools (wrk,
httperf), servers the runner starts by command (nginx), and the link emulator, which must
stay off the server's CPU. wb-server, wb-sclient and asyncgen pin themselves (--cpu)."""

from __future__ import annotations

import os


def pin_argv(cpu: int | None) -> list[str]:
    """The argv prefix that runs a command on CPU `cpu`; nothing when cpu is None."""
    return [] if cpu is None else ["taskset", "-c", str(cpu)]


def observer_argv(cpus: set[int]) -> list[str]:
    """The argv prefix for an observer of the server (perf): on `cpus` (never the server's),
    under SCHED_IDLE, so it runs only when they have nothing else to run and a waking
    generator preempts it at once. At normal priority perf record's buffer drains on the
    generator's CPU made 1-3 % of its sends over 1 ms late at 100 req/s (BM98 Fig 1)."""
    return ["taskset", "-c", ",".join(map(str, sorted(cpus))), "chrt", "--idle", "0"]


def pin_running(pid: int, cpus: set[int]) -> None:
    """Moves every thread of a running process to `cpus` (sched_setaffinity acts on one
    thread, and threads started before it keep their own mask)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except ProcessLookupError:
            continue  # a thread that ended meanwhile


def all_but(cpu: int) -> set[int]:
    """Every CPU this process may use except `cpu` (what runs beside a pinned server)."""
    return os.sched_getaffinity(0) - {cpu}
