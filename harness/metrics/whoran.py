"""Who ran on a measured CPU over a window (the generator's, the server's), and behind whom the
tree measured there waited for it: `wb-whoran --cpu CPU` (sched_switch and sched_wakeup on that
CPU only, harness/ktrace/whoran.bpf.c).

/proc/stat cannot say this where the kernel has no IRQ time accounting: the measured tree's run
time then includes the softirq work done in its time, which /proc/stat books as softirq, so
"the CPU's user and system time less the tree's" hides other tasks' time
(docs/bench-demo.md). The tracer sees each context switch instead: every slice is charged to
the task that ran it, and each wait of a measured thread to the tasks that held the CPU
meanwhile. The CPU's ksoftirqd does the network work its interrupts leave over, the measured
tree's traffic, so it is not counted as another task."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clients import pinning
from clients.paths import MissingBinary
from harness import monotonic
from harness.metrics import ktrace

# tasks named in other_generator_tasks and other_server_tasks, most time first
NAMED_TASKS = 4
# whose tree a who-ran tracer measures (wb-whoran's roles: its --pid, its --generator-pid)
SERVER, GENERATOR = "server", "generator"
_ROLE_FLAG = {SERVER: "--pid", GENERATOR: "--generator-pid"}


@dataclass(frozen=True)
class TaskTime:
    comm: str
    pid: int
    ran_s: float


@dataclass(frozen=True)
class WhoRan:
    """One window on a measured CPU, from wb-whoran's document: role is whose tree was
    measured there (SERVER, GENERATOR), measured_s its time there."""

    role: str
    edges: ktrace.WindowEdges
    window_s: float
    measured_s: float
    ksoftirqd_s: float
    idle_s: float
    own_s: float  # the run's own other processes (its link emulators): not others
    others_s: float
    waited_s: float  # the measured threads runnable there but not running
    waited_behind_others_s: float  # of which while another task ran there
    # of which each wait's part past the late threshold: what can make a send late. Each
    # wake-up's own latency (µs) counts as waiting in the trace, not in schedstat; no send is
    # late for it
    late_behind_others_s: float
    tasks: tuple[TaskTime, ...]  # the other tasks, most time first

    @classmethod
    def of(cls, document: dict[str, Any]) -> WhoRan:
        who = document["who_ran"]
        return cls(role=who["role"], edges=ktrace.WindowEdges.of(document),
                   window_s=document["window_ns"] / 1e9, measured_s=who["measured_ns"] / 1e9,
                   ksoftirqd_s=who["ksoftirqd_ns"] / 1e9, idle_s=who["idle_ns"] / 1e9,
                   own_s=who["own_ns"] / 1e9, others_s=who["other_ns"] / 1e9,
                   waited_s=who["waited_ns"] / 1e9,
                   waited_behind_others_s=who["waited_others_ns"] / 1e9,
                   late_behind_others_s=who["waited_others_late_ns"] / 1e9,
                   tasks=tuple(TaskTime(t["comm"], t["pid"], t["ran_ns"] / 1e9)
                               for t in who["tasks"]))

    def named(self) -> str:
        """The tasks that ran there longest, e.g. "kdamond.0 0.31 %, wanbench 0.12 %"."""
        return ", ".join(f"{t.comm} {100 * t.ran_s / self.window_s:.2f} %"
                         for t in self.tasks[:NAMED_TASKS]) if self.window_s else ""


@functools.cache
def cannot_run() -> str | None:
    """Why wb-whoran cannot run here (its probe, once per process: its programs load, attach
    and detach), with the fix; None where it can."""
    probed, why = ktrace.probe(ktrace.WHO_RAN)
    return None if probed is not None else why


def trace(role: str, pids: list[int], measured_cpu: int, workdir: Path,
          late_us: float | None = None, own_pids: Sequence[int] = ()) -> ktrace.KernelTrace:
    """The tracer for one window on measured_cpu, where role's trees (pids) run (prepare,
    start, stop, close as KernelTrace); late_us: the tree's late threshold (the generator's;
    the server has none); own_pids: the run's other processes (its link emulators), whose
    time there is the run's own, not others'. Its loader sleeps through the window, off that
    CPU (unless it is the only one)."""
    args = ["--cpu", str(measured_cpu), "--late-us", f"{late_us or 0:g}"]
    for pid in pids:
        args += [_ROLE_FLAG[role], str(pid)]
    for pid in own_pids:
        args += ["--own-pid", str(pid)]
    name = "whoran" if role == GENERATOR else f"whoran-{role}"
    return ktrace.KernelTrace(ktrace.WHO_RAN, args,
                              pinning.all_but(measured_cpu) or {measured_cpu}, workdir, name)


@dataclass(frozen=True)
class Seen:
    """What one window showed of a measured CPU: its trace, or why it was not traced."""

    who_ran: WhoRan | None = None
    untraced: str = "not traced"


class TracedCpu:
    """wb-whoran over one window on one measured CPU (role's trees there), where it
    can run; else why not, which the measure's fallback says. prepare() before the window,
    start() at its start, stop() at its end, close() whatever happened. refused: why this CPU
    must not be traced here, as the caller knows it (an emulated CPU)."""

    def __init__(self, role: str, pids: list[int], cpu: int | None, workdir: Path,
                 late_us: float | None = None, refused: str | None = None,
                 own_pids: Sequence[int] = ()):
        self.role, self.pids, self.cpu, self.workdir = role, pids, cpu, workdir
        self.late_us, self.refused, self.own_pids = late_us, refused, own_pids
        self.untraced = ""
        self._tracer: ktrace.KernelTrace | None = None
        self._unready: ktrace.KernelTrace | None = None  # not ready by the window's start

    async def prepare(self, left_s: float | None) -> None:
        """Loaded within left_s (None: however long it takes): the window does not wait for a
        measure of interference (a loaded machine can take longer than a short warm-up)."""
        try:
            await monotonic.within(self._prepare(), left_s)
        except TimeoutError:
            # stopped at the window's end (close), not now: a loader stopped mid-load can
            # take as long to go as it took to load
            self.untraced = "wb-whoran was not ready when the window started"
            self._tracer, self._unready = None, self._tracer

    async def _prepare(self) -> None:
        if self.cpu is None or not self.pids:
            self.untraced = f"no {self.role} on this host"
            return
        if self.refused:
            self.untraced = self.refused
            return
        # in a thread: the probe loads programs (seconds on a loaded machine), and the
        # window's start must not wait for it
        why = await asyncio.to_thread(cannot_run)
        if why is not None:
            self.untraced = why
            return
        try:
            self._tracer = trace(self.role, self.pids, self.cpu, self.workdir, self.late_us,
                                 self.own_pids)
            await self._tracer.prepare()
        except (MissingBinary, ktrace.KernelTraceFailed, OSError) as exc:
            self.untraced = str(exc)
            await self.close()

    async def start(self, at_ns: int | None = None) -> None:
        if self._tracer is None:
            return
        try:
            await self._tracer.start(at_ns)
        except ktrace.KernelTraceFailed as exc:
            self.untraced = str(exc)
            await self.close()

    async def stop(self, at_ns: int | None = None) -> Seen:
        if self._tracer is None:
            return Seen(None, self.untraced)
        try:
            return Seen(WhoRan.of(await self._tracer.stop(at_ns)))
        except ktrace.KernelTraceFailed as exc:
            return Seen(None, str(exc))

    async def close(self) -> None:
        for tracer in (self._tracer, self._unready):
            if tracer is not None:
                await tracer.close()
        self._tracer = self._unready = None
