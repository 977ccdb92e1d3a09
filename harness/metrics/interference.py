"""What neighbours did to one measured window: CPU steal (the hypervisor gave the vCPU to
someone else), time the server waited for its own CPU (another task ran there), softirq
time and other tasks' time on the generator's CPU and on the server's, and the CPU clock.
Read at the window's start and end only, so it costs nothing in between.

Other tasks' time on the generator's CPU and on the server's, and the wait of the tree
measured there behind them, come from wb-whoran where it runs (harness.metrics.whoran:
exact, softirq hides nothing); elsewhere other_generator_cpu_pct and other_server_cpu_pct are
/proc/stat's lower bound and other_generator_measure, other_server_measure say why."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.metrics import cpu
from harness.metrics.whoran import GENERATOR, SERVER, Seen

CPUINFO = Path("/proc/cpuinfo")
UNTRACED = Seen()


def others_columns(role: str) -> tuple[str, str, str, str]:
    """The columns of other tasks' time on role's CPU (GENERATOR: all null without one): their
    time there, role's wait behind them, the longest-running of them, and how it was measured.
    """
    return (f"other_{role}_cpu_pct", f"{role}_wait_others_pct", f"other_{role}_tasks",
            f"other_{role}_measure")


def cpu_mhz(which: int) -> float | None:
    """The CPU's current clock: cpufreq where the kernel has it, else /proc/cpuinfo."""
    freq = Path(f"/sys/devices/system/cpu/cpu{which}/cpufreq/scaling_cur_freq")
    try:
        return int(freq.read_text()) / 1000
    except (OSError, ValueError):
        pass
    try:
        blocks = CPUINFO.read_text().split("\n\n")
    except OSError:
        return None
    for block in blocks:
        if re.search(rf"^processor\s*:\s*{which}$", block, re.MULTILINE):
            found = re.search(r"^cpu MHz\s*:\s*([\d.]+)", block, re.MULTILINE)
            return float(found.group(1)) if found else None
    return None


@dataclass
class _Snapshot:
    cpus: dict[int, cpu.CpuTimes]
    server_ran_s: float
    server_run_periods: int
    server_waited_s: float
    generator_ran_s: float
    generator_waited_s: float
    mhz: float | None


def _pct(part: float, whole: float) -> float | None:
    return 100 * part / whole if whole > 0 else None


class Interference:
    """Start at the window's start, stop at its end: the point's interference columns."""

    def __init__(self, server_pid: int, server_cpu: int, generator_pids: list[int],
                 generator_cpu: int | None, proc_stat: Path = cpu.PROC_STAT):
        self.server_cpu, self.generator_cpu, self.proc_stat = server_cpu, generator_cpu, proc_stat
        self._server = cpu.TreeSchedstat(server_pid)
        self._generators = cpu.TreeSchedstat(*generator_pids)
        self._first: _Snapshot | None = None

    def _snapshot(self) -> _Snapshot:
        ran_s, waited_s, periods = self._server.sample()
        generator_ran_s, generator_waited_s, _ = self._generators.sample()
        return _Snapshot(cpu.all_cpu_times(self.proc_stat), ran_s, periods, waited_s,
                         generator_ran_s, generator_waited_s, cpu_mhz(self.server_cpu))

    def start(self) -> None:
        self._first = self._snapshot()

    def stop(self, window_s: float, generator_cpu: Seen = UNTRACED,
             server_cpu: Seen = UNTRACED) -> dict[str, Any]:
        """generator_cpu, server_cpu: what wb-whoran saw of each over the window, or
        why it did not run."""
        assert self._first is not None, "start() first"
        first, last = self._first, self._snapshot()

        def delta(which: int, *states: str) -> float:
            return sum(last.cpus[which].seconds[s] - first.cpus[which].seconds[s]
                       for s in states)

        def elapsed(which: int) -> float:
            return last.cpus[which].total_s - first.cpus[which].total_s

        steal = {n: _pct(delta(n, "steal"), elapsed(n)) for n in last.cpus}
        total_elapsed = sum(elapsed(n) for n in last.cpus)
        served = self.server_cpu
        busy_here = delta(served, "user", "nice", "system")
        others = max(0.0, busy_here - (last.server_ran_s - first.server_ran_s))
        generator = self.generator_cpu
        mhz = [m for m in (first.mhz, last.mhz) if m is not None]
        return {
            "steal_pct": _pct(sum(delta(n, "steal") for n in last.cpus), total_elapsed),
            "steal_server_cpu_pct": steal.get(served),
            "steal_generator_cpu_pct": (steal.get(self.generator_cpu)
                                        if self.generator_cpu is not None else None),
            "server_wait_pct": _pct(last.server_waited_s - first.server_waited_s, window_s),
            "generator_wait_pct": _pct(last.generator_waited_s - first.generator_waited_s,
                                       window_s),
            **_others_on(SERVER, server_cpu, _pct(others, elapsed(served))),
            # Below saturation a server pays per wake-up, not only per request: its run
            # periods per reply say how often it slept (bench-servers' wake-ups/reply)
            "server_run_periods": last.server_run_periods - first.server_run_periods,
            # the server CPU's softirq share is cpu_softirq_pct (the CPU sampler's)
            "softirq_generator_cpu_pct": (_pct(delta(generator, "softirq"), elapsed(generator))
                                          if generator is not None else None),
            # the generator's CPU left idle: with the server CPU's (cpu_idle_pct), what the
            # machine had to spare (docs/bench-wan.md: room for a link emulator)
            "idle_generator_cpu_pct": (_pct(delta(generator, "idle", "iowait"),
                                            elapsed(generator))
                                       if generator is not None else None),
            "cpu_mhz": sum(mhz) / len(mhz) if mhz else None,
            **(dict.fromkeys(others_columns(GENERATOR)) if generator is None else
               _others_on(GENERATOR, generator_cpu, _pct(
                   max(0.0, delta(generator, "user", "nice", "system")
                       - (last.generator_ran_s - first.generator_ran_s)),
                   elapsed(generator)))),
        }


def _others_on(role: str, seen: Seen, lower_bound_pct: float | None) -> dict[str, Any]:
    """Other tasks' time on role's CPU (the generator's late sends, the server's wait may be
    theirs): traced, with role's wait behind them (the generator's past its late threshold,
    the server's whole: it has none); else lower_bound_pct, /proc/stat's user and system time
    there less role's run time, which the softirq run in role's time hides (its run time
    includes it, the CPU's user and system time do not), and no wait behind them. The keys are
    others_columns(role)."""
    cpu_pct, wait_pct, tasks, measure = others_columns(role)
    who_ran = seen.who_ran
    if who_ran is not None:
        return {cpu_pct: _pct(who_ran.others_s, who_ran.window_s),
                wait_pct: _pct(who_ran.late_behind_others_s, who_ran.window_s),
                tasks: who_ran.named(), measure: "traced"}
    return {cpu_pct: lower_bound_pct, wait_pct: None, tasks: None,
            measure: f"lower bound: {seen.untraced or 'not traced'}"}
