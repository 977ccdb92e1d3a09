"""Children of the runner: a contained command stops like an uncontained one, and whatever
it forked goes with it."""

from __future__ import annotations

import asyncio
import sys
import time

from harness import procs
from harness.metrics.cpu import process_tree

# Forks a grandchild, then sleeps; installs no signal handler of its own.
FORKS_AND_SLEEPS = "import os, time\nos.fork()\ntime.sleep(60)\n"


async def _start_contained() -> tuple[asyncio.subprocess.Process, list[int]]:
    proc = await procs.spawn(procs.CONTAINED + [sys.executable, "-c", FORKS_AND_SLEEPS])
    deadline = time.monotonic() + 10
    while len(process_tree(proc.pid)) < 4:  # unshare, its init, the command, its fork
        assert time.monotonic() < deadline, "the contained command did not start"
        await asyncio.sleep(0.02)
    return proc, process_tree(proc.pid)


def _alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                    alive.append(pid)
        except OSError:
            continue
    return alive


def test_a_command_without_a_sigterm_handler_stops_at_sigterm():
    async def scenario() -> tuple[float, int, list[int]]:
        proc, tree = await _start_contained()
        assert procs.contained_pid(proc.pid) == tree[2]
        started = time.monotonic()
        status = await procs.stop(proc, timeout=10)
        return time.monotonic() - started, status, tree

    took, status, tree = asyncio.run(scenario())
    # an init would ignore SIGTERM and wait out the 10 s; the command is not the init
    assert took < 5, f"stop took {took:.1f} s"
    assert status != 0
    assert not _alive(tree), "the command's fork must go with it"
