"""The processes one side of a point starts (server, generators): argv and stderr logged in
its raw directory, every one stopped on the way out; and why a point could not be measured."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from clients import validity
from harness import monotonic, procs


class PointFailed(RuntimeError):
    """A point that could not be measured; recorded as invalid with this reason (a sentence
    alone: clients.validity's not_measured).

    lost_host: the worker (host) whose loss cut the point short; such a record is measured
    again on resume."""

    def __init__(self, reason: str | validity.Reason, lost_host: str | None = None):
        if isinstance(reason, str):
            reason = validity.not_measured(reason)
        super().__init__(reason, lost_host)  # both in args: it crosses to the run's host intact
        self.reason, self.lost_host = reason, lost_host

    def __str__(self) -> str:
        return self.reason.sentence


class Children:
    """Processes started for one point × repetition, logged in raw (argv.txt, LOG.stderr)."""

    def __init__(self, raw: Path):
        self.raw = raw
        self.procs: list[asyncio.subprocess.Process] = []

    async def spawn(self, argv: list[str], log: str, stdin: int = asyncio.subprocess.DEVNULL,
                    pass_fds: tuple[int, ...] = ()) -> asyncio.subprocess.Process:
        with (self.raw / "argv.txt").open("a") as record:
            record.write(json.dumps(argv) + "\n")
        with (self.raw / f"{log}.stderr").open("wb") as stderr:  # the child keeps its copy
            proc = await procs.spawn(argv, stdout=asyncio.subprocess.PIPE, stderr=stderr,
                                     stdin=stdin, pass_fds=pass_fds)
        self.procs.append(proc)
        return proc

    async def stop_all(self) -> None:
        """Newest first: the generators before the server they load."""
        for proc in reversed(self.procs):
            await procs.stop(proc)


async def read_line(stream: asyncio.StreamReader, timeout: float, what: str) -> str:
    try:
        line = await monotonic.within(stream.readline(), timeout)
    except TimeoutError:
        raise PointFailed(f"{what}: no answer within {timeout:.0f} s") from None
    if not line:
        raise PointFailed(f"{what}: exited before it was ready")
    return line.decode(errors="replace").strip()
