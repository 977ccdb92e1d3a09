"""CPU time of a process tree (/proc/PID/stat) and of one CPU (/proc/stat)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def task_ids(pid: int) -> list[str]:
    """The thread ids of a process; none once it is gone."""
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def process_tree(pid: int) -> list[int]:
    """pid and all its descendants (server workers, generator shards)."""
    pids, stack = [], [pid]
    while stack:
        current = stack.pop()
        pids.append(current)
        for task in task_ids(current):
            try:
                with open(f"/proc/{current}/task/{task}/children") as children:
                    stack.extend(int(c) for c in children.read().split())
            except OSError:
                continue
    return pids


def pid_cpu_s(pid: int) -> tuple[float, float] | None:
    """User and system seconds of one process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            stat = file.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


class TreeCpu:
    """CPU seconds of process trees; a process that exits keeps counting at its last reading,
    so a generator or worker ending inside the window never makes the total go backwards."""

    def __init__(self, roots: list[int]):
        self.roots = roots
        self.last: dict[int, tuple[float, float]] = {}

    def read(self) -> tuple[float, float]:
        for root in self.roots:
            for pid in process_tree(root):
                reading = pid_cpu_s(pid)
                if reading is not None:
                    self.last[pid] = reading
        return (sum(u for u, _ in self.last.values()), sum(s for _, s in self.last.values()))


class TreeSchedstat:
    """CPU time (ns, /proc/PID/task/TID/schedstat: time on CPU, time waiting on a run queue,
    run periods) of process trees, summed over their threads. Exact to the nanosecond, where
    /proc/PID/stat counts 10 ms ticks; a thread that exits keeps counting at its last
    reading."""

    def __init__(self, *roots: int):
        self.roots = roots
        self.last: dict[tuple[int, str], tuple[int, int, int]] = {}

    def _update(self) -> None:
        for root in self.roots:
            for pid in process_tree(root):
                for tid in task_ids(pid):
                    try:
                        with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                            ran_ns, waited_ns, periods = (int(v) for v in f.read().split()[:3])
                    except (OSError, ValueError):
                        continue
                    self.last[(pid, tid)] = (ran_ns, waited_ns, periods)

    def sample(self) -> tuple[float, float, int]:
        """Seconds on a CPU, seconds runnable but waiting for one (another task ran there,
        or a sibling), and run periods: one walk of the trees."""
        self._update()
        return (sum(r for r, _, _ in self.last.values()) / 1e9,
                sum(w for _, w, _ in self.last.values()) / 1e9,
                sum(p for _, _, p in self.last.values()))

    def read(self) -> tuple[float, int]:
        """Seconds on a CPU and run periods."""
        ran_s, _, periods = self.sample()
        return ran_s, periods


@dataclass(frozen=True)
class CpuTimes:
    """Seconds spent by one CPU in each state since boot."""

    seconds: dict[str, float]
    # time.monotonic() when read; None for a /proc/stat a test wrote
    read_at_s: float | None = None

    @property
    def busy_s(self) -> float:
        """Running anything, this guest's or the kernel's; time the host stole is not."""
        return sum(v for k, v in self.seconds.items() if k not in ("idle", "iowait", "steal"))

    @property
    def total_s(self) -> float:
        return sum(self.seconds.values())


PROC_STAT = Path("/proc/stat")


def all_cpu_times(proc_stat: Path = PROC_STAT) -> dict[int, CpuTimes]:
    """Every CPU's times from one read of /proc/stat (a test may hand it another file)."""
    times = {}
    for line in proc_stat.read_text().splitlines():
        name, _, rest = line.partition(" ")
        if name.startswith("cpu") and name[3:].isdigit():
            values = [int(v) / CLOCK_TICKS for v in rest.split()[:len(CPU_FIELDS)]]
            times[int(name[3:])] = CpuTimes(dict(zip(CPU_FIELDS, values, strict=False)))
    return times


def cpu_times(cpu: int, proc_stat: Path = PROC_STAT) -> CpuTimes:
    read_at = time.monotonic()
    times = all_cpu_times(proc_stat)
    if cpu not in times:
        raise ValueError(f"cpu{cpu} is not in /proc/stat (this machine has {os.cpu_count()} "
                         f"CPUs)")
    return CpuTimes(times[cpu].seconds, read_at if proc_stat == PROC_STAT else None)


def _elapsed_and_idle(before: CpuTimes, after: CpuTimes) -> tuple[float, float]:
    """Seconds between two readings, and the idle seconds among them.

    A tickless kernel measures idle time (entry to exit, interrupts excluded) and only
    rounds it to 10 ms, while user, system and softirq are sampled by a tick that an idle
    CPU has stopped: a CPU woken thousands of times a second for less than a tick each
    time shows almost no busy ticks (3 % beside a server busy 10 % of the time). So busy
    time is the wall-clock time between the readings less the idle and stolen time."""
    delta = {k: after.seconds[k] - before.seconds.get(k, 0.0) for k in after.seconds}
    idle = delta["idle"] + delta.get("iowait", 0.0)
    if before.read_at_s is None or after.read_at_s is None:
        return after.total_s - before.total_s, idle
    return after.read_at_s - before.read_at_s, idle


def busy_s_between(before: CpuTimes, after: CpuTimes) -> float:
    """Seconds the CPU ran anything (tasks, interrupts) between two readings; not the time
    the host stole."""
    elapsed, idle = _elapsed_and_idle(before, after)
    steal = after.seconds.get("steal", 0.0) - before.seconds.get("steal", 0.0)
    return max(0.0, elapsed - idle - steal)


def cpu_percentages(before: CpuTimes, after: CpuTimes) -> dict[str, float | None]:
    """Share of the CPU's time in each state between two readings, in %: idle measured,
    the busy states sampled by the tick (_elapsed_and_idle), so they need not add up."""
    elapsed, idle = _elapsed_and_idle(before, after)
    if elapsed <= 0:
        return {f"{name}_pct": None for name in ("user", "system", "softirq", "idle", "steal")}
    delta = {k: after.seconds[k] - before.seconds[k] for k in after.seconds}
    idle = min(idle, elapsed)
    return {
        "user_pct": 100 * (delta["user"] + delta["nice"]) / elapsed,
        "system_pct": 100 * (delta["system"] + delta["irq"]) / elapsed,
        "softirq_pct": 100 * delta["softirq"] / elapsed,
        "idle_pct": 100 * idle / elapsed,
        "steal_pct": 100 * delta.get("steal", 0.0) / elapsed,
    }
