"""A perf (stat or record) that counts exactly the measured window: started before it with its
events off, switched on and off over its control fifo.

perf takes ~0.2 s here to start (more on a busy CPU). It used to start at the window's start
under SCHED_IDLE, and beside a busy CPU it could wait the whole window for one and record
nothing (CI: "perf record produced no samples"). Now it starts at normal priority, before the
window, and answers a ping; at the window's start it is switched on, and only then drops to
SCHED_IDLE, so its buffer drains never delay a generator sharing its CPUs (at normal priority
they made 1-3 % of BM98 Fig 1's sends over 1 ms late). At the window's end it is raised back,
switched off, and stopped.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from clients import pinning
from harness import procs

# perf answers within a second on this machine; a CPU shared with a busy generator at
# normal priority still gives it half of one
ANSWER_TIMEOUT_S = 30.0


class PerfFailed(RuntimeError):
    """perf did not start or did not answer: the point cannot have what it asked for."""


class ControlledPerf:
    def __init__(self, name: str, argv: list[str], cpus: set[int], workdir: Path):
        self.name = name  # e.g. "record": names its fifos and its stderr file
        self.argv = argv
        self.cpus = cpus
        self.ctl = workdir / f"perf-{name}.ctl"
        self.ack = workdir / f"perf-{name}.ack"
        self.stderr = workdir / f"perf-{name}.stderr"
        self._proc: asyncio.subprocess.Process | None = None
        self._ctl_fd: int | None = None
        self._acks: asyncio.StreamReader | None = None
        self._transport: asyncio.ReadTransport | None = None
        self._answered = False  # it answered a ping: it reads its control fifo

    async def start(self) -> None:
        """Starts perf with its events off; returns once it answers (it is then counting
        nothing, ready to be switched on)."""
        for fifo in (self.ctl, self.ack):
            fifo.unlink(missing_ok=True)
            os.mkfifo(fifo)
        # read-write opens: neither end blocks waiting for perf to open the other
        self._ctl_fd = os.open(self.ctl, os.O_RDWR | os.O_NONBLOCK)
        ack_fd = os.open(self.ack, os.O_RDWR | os.O_NONBLOCK)
        loop = asyncio.get_running_loop()
        self._acks = asyncio.StreamReader()
        self._transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(self._acks), os.fdopen(ack_fd, "rb", 0))
        with self.stderr.open("wb") as stderr:
            self._proc = await procs.spawn(
                pinning.pin_set_argv(self.cpus) + self.argv
                + ["-D", "-1", "--control", f"fifo:{self.ctl},{self.ack}"], stderr=stderr)
        await self._command("ping")
        self._answered = True

    async def enable(self) -> None:
        """Counting from now on, at idle priority."""
        await self._command("enable")
        assert self._proc is not None
        pinning.set_idle(self._proc.pid, True)

    async def stop(self) -> None:
        """Counting no more; perf writes its output and exits. Safe to call at any time, and
        more than once."""
        proc, self._proc = self._proc, None
        try:
            if proc is not None and proc.returncode is None:
                pinning.set_idle(proc.pid, False)  # its output is written at normal speed
                if self._answered:
                    try:
                        await self._command("disable", proc)
                    except PerfFailed:
                        pass  # stopped below all the same; what it wrote stays
                await procs.stop(proc, signal.SIGINT, timeout=ANSWER_TIMEOUT_S)
        finally:
            if self._transport is not None:
                self._transport.close()
                self._transport = None
            if self._ctl_fd is not None:
                os.close(self._ctl_fd)
                self._ctl_fd = None
            for fifo in (self.ctl, self.ack):
                fifo.unlink(missing_ok=True)

    async def _command(self, command: str,
                       proc: asyncio.subprocess.Process | None = None) -> None:
        proc = proc or self._proc
        assert proc is not None and self._ctl_fd is not None and self._acks is not None
        os.write(self._ctl_fd, f"{command}\n".encode())
        answer = asyncio.ensure_future(self._acks.readline())
        exited = asyncio.ensure_future(proc.wait())
        done, _ = await asyncio.wait({answer, exited}, timeout=ANSWER_TIMEOUT_S,
                                     return_when=asyncio.FIRST_COMPLETED)
        for task in (answer, exited):
            if task not in done:
                task.cancel()
        # perf writes "ack\n\0": the NUL is read as the next answer's first byte
        if answer in done and answer.result().strip(b"\0\n ") == b"ack":
            return
        # perf's error comes first, before any usage text
        said = " ".join(self.stderr.read_text(errors="replace").split()[:40]) \
            if self.stderr.exists() else ""
        why = (f"exited with status {proc.returncode}" if exited in done
               else f"did not answer '{command}' within {ANSWER_TIMEOUT_S:.0f} s")
        raise PerfFailed(f"perf {self.name} {why}" + (f": {said}" if said else ""))
