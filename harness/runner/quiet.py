"""Waiting, within a stated bound, for the measured CPUs to be free of other tasks before each
point × repetition (the scenario's `quiet_wait_s`, `wanbench run --quiet-wait S`), as pyperf
and LKP users arrange by hand. On a shared machine a repetition measured beside a neighbour
is invalid (interference) and measured again; waiting for the neighbour first costs less, and
where it never stops, the run says how long it waited and how busy the CPUs stayed.

A CPU is quiet when others kept it busy for at most the late-sends limit of a probe
(clients.validity.LATE_LIMIT, 1 %): the share of a window that, spent by others on the
generator's CPU, makes its late sends theirs and the point invalid. Busy is /proc/stat's
user, nice, system, irq, softirq and steal time (steal: the hypervisor ran another vCPU);
between points nothing of the run's is left on the measured CPUs but its own waiting Python.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from clients.validity import LATE_LIMIT
from harness.analysis.numbers import point_label
from harness.runner.context import RunContext
from harness.scenario import Point

QUIET_SHARE = LATE_LIMIT
PROBE_S = 0.5  # each look at the CPUs: 50 ticks of 10 ms, enough to see a 1 % neighbour
# /proc/stat cpuN fields counted busy: user nice system (not idle, iowait) irq softirq steal
BUSY_FIELDS = (0, 1, 2, 5, 6, 7)
PROC_STAT = Path("/proc/stat")


def cpu_times(text: str) -> dict[int, tuple[int, int]]:
    """Per CPU of /proc/stat's text: (busy ticks, all ticks) since boot (guest time is
    already in user)."""
    times = {}
    for line in text.splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit():
            ticks = [int(f) for f in fields[:8]]
            times[int(name[3:])] = (sum(ticks[i] for i in BUSY_FIELDS), sum(ticks))
    return times


def busy_shares(before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]],
                cpus: list[int]) -> dict[int, float]:
    """Each CPU's busy share between two readings of cpu_times."""
    shares = {}
    for cpu in cpus:
        busy, total = (a - b for a, b in zip(after[cpu], before[cpu], strict=True))
        shares[cpu] = busy / total if total > 0 else 0.0
    return shares


@dataclass(frozen=True)
class Quiet:
    """What a wait found: how long it waited and the CPUs' busy shares at its last probe."""

    waited_s: float
    busy: dict[int, float]

    @property
    def quiet(self) -> bool:
        return all(share <= QUIET_SHARE for share in self.busy.values())

    def describe(self, limit_s: float) -> str:
        shares = ", ".join(f"CPU {cpu} {share:.0%}" for cpu, share in sorted(self.busy.items()))
        if self.quiet:
            return f"waited {self.waited_s:.1f} s for the measured CPUs to be quiet ({shares})"
        return (f"the measured CPUs were not quiet within {limit_s:g} s (busy: {shares}; quiet "
                f"is at most {QUIET_SHARE:.0%}): measuring anyway")


async def wait(cpus: list[int], limit_s: float, probe_s: float = PROBE_S,
               read: Callable[[], str] = PROC_STAT.read_text) -> Quiet:
    """Probes the CPUs every probe_s until each is quiet or limit_s has passed."""
    start = time.monotonic()
    while True:
        before = cpu_times(read())
        await asyncio.sleep(probe_s)
        found = Quiet(time.monotonic() - start, busy_shares(before, cpu_times(read()), cpus))
        if found.quiet or found.waited_s + probe_s > limit_s:
            return found


async def before_point(ctx: RunContext, point: Point) -> None:
    """The runner's one call before each attempt: waits for the point's server and generator
    CPUs where the scenario asks it to (on this machine: a cluster's CPUs are its hosts')."""
    limit = ctx.scenario.quiet_wait_s
    if not limit or ctx.cluster:
        return
    cpus = point.config.cpus
    found = await wait([cpus.server, cpus.generator], limit)
    ctx.on_event(f"{point_label(point.sweep_values)}: {found.describe(limit)}")
