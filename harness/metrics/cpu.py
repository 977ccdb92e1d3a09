"""CPU time of a process tree (/proc/PID/stat) and of one CPU (/proc/stat)."""

from __future__ import annotations

import os
from dataclasses import dataclass

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
    """CPU time (ns, /proc/PID/task/TID/schedstat: time on CPU, run periods) of a process
    tree, summed over its threads. Exact to the nanosecond, where /proc/PID/stat counts
    10 ms ticks; a thread that exits keeps counting at its last reading."""

    def __init__(self, root: int):
        self.root = root
        self.last: dict[tuple[int, str], tuple[int, int]] = {}

    def read(self) -> tuple[float, int]:
        for pid in process_tree(self.root):
            for tid in task_ids(pid):
                try:
                    with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                        ran_ns, _, periods = (int(v) for v in f.read().split()[:3])
                except (OSError, ValueError):
                    continue
                self.last[(pid, tid)] = (ran_ns, periods)
        return (sum(r for r, _ in self.last.values()) / 1e9,
                sum(p for _, p in self.last.values()))


@dataclass(frozen=True)
class CpuTimes:
    """Seconds spent by one CPU in each state since boot."""

    seconds: dict[str, float]

    @property
    def busy_s(self) -> float:
        return sum(v for k, v in self.seconds.items() if k not in ("idle", "iowait"))

    @property
    def total_s(self) -> float:
        return sum(self.seconds.values())


def cpu_times(cpu: int) -> CpuTimes:
    prefix = f"cpu{cpu} "
    with open("/proc/stat") as file:
        lines = file.read().splitlines()
    for line in lines:
        if line.startswith(prefix):
            values = [int(v) / CLOCK_TICKS for v in line.split()[1:1 + len(CPU_FIELDS)]]
            return CpuTimes(dict(zip(CPU_FIELDS, values, strict=False)))
    raise ValueError(f"cpu{cpu} is not in /proc/stat (this machine has {os.cpu_count()} CPUs)")


def cpu_percentages(before: CpuTimes, after: CpuTimes) -> dict[str, float | None]:
    """Share of the CPU's time in each state between two readings, in %."""
    elapsed = after.total_s - before.total_s
    if elapsed <= 0:
        return {f"{name}_pct": None for name in ("user", "system", "softirq", "idle")}
    delta = {k: after.seconds[k] - before.seconds[k] for k in after.seconds}
    return {
        "user_pct": 100 * (delta["user"] + delta["nice"]) / elapsed,
        "system_pct": 100 * (delta["system"] + delta["irq"]) / elapsed,
        "softirq_pct": 100 * delta["softirq"] / elapsed,
        "idle_pct": 100 * (delta["idle"] + delta["iowait"]) / elapsed,
    }
