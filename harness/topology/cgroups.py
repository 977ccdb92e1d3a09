"""A CPU budget for the server: cgroup CPU bandwidth, so that a "slower server" saturates
before its generators do, as the papers' servers did beside many client machines.

cgroup v2 (`cpu.max`) and v1 (`cpu.cfs_quota_us` / `cpu.cfs_period_us`) alike. The runner
moves the server's processes into its group (`admit`) once its cold connections are held:
the budget stands for a slower server while it is measured, and setting up thousands of
idle connections is not measured and would take several times as long under the budget
(docs/validity.md, "A server with a CPU budget"). What the server forks afterwards is in the
group too.

Groups live under `wanbench/` in the CPU hierarchy. Each is recorded, before it exists, in a
ledger of its own (harness/topology/ledger.py) in the same state directory as topologies'
(/run/wanbench/topologies, or $WANBENCH_TOPO_STATE), with a run prefix of its own as its name
and the owner's pid and start time; a loopback run has no other ledger. A run killed with -9
leaves its group and that ledger; `wanbench topo clean` removes both once the owner is gone
(pid and start time: a reused pid is not taken for the owner), stopping whatever the group
still holds. Only a group named after its ledger's prefix is ever removed (recorded_group)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from harness.topology.addressing import new_prefix
from harness.topology.ledger import Ledger

CGROUP_ROOT = Path("/sys/fs/cgroup")
PARENT = "wanbench"
MIN_PERIOD_US, MAX_PERIOD_US = 1_000, 1_000_000  # the kernel's bounds on a CFS period
MIN_QUOTA_US = 1_000  # nor does it take a quota under 1 ms (v1 and v2 alike)


class CgroupError(RuntimeError):
    """No CPU controller to budget with; the message says what is missing and the fix."""


def check_budget(pct: float, period_us: int) -> None:
    """A budget the kernel can enforce as asked: pct % of period_us is at least its minimum
    quota. (Clamping it would run the server at MIN_QUOTA_US / period_us instead: 35 % of a
    1 ms period is 100 %.)"""
    quota = period_us * pct / 100
    if quota < MIN_QUOTA_US:
        shortest = -(-MIN_QUOTA_US * 100 // pct)
        raise ValueError(f"a {pct:g} % budget of a {period_us} µs period is a {quota:g} µs "
                         f"quota, under the kernel's {MIN_QUOTA_US} µs minimum: make "
                         f"budget_period_us at least {shortest:.0f}")


@dataclass(frozen=True)
class Throttling:
    """cpu.stat's bandwidth counters: periods with runnable tasks, periods that ran out of
    budget, and the time the group's tasks were held back."""

    periods: int
    throttled_periods: int
    throttled_s: float

    def since(self, earlier: Throttling) -> Throttling:
        return Throttling(self.periods - earlier.periods,
                          self.throttled_periods - earlier.throttled_periods,
                          self.throttled_s - earlier.throttled_s)


def cpu_hierarchy(root: Path | None = None) -> tuple[int, Path]:
    """(version, the directory wanbench's groups go under); CgroupError when there is none."""
    root = root or CGROUP_ROOT
    if (root / "cgroup.controllers").is_file():
        if "cpu" not in (root / "cgroup.controllers").read_text().split():
            raise CgroupError(f"{root}: cgroup v2 without the cpu controller; fix: a kernel "
                              "with CONFIG_CFS_BANDWIDTH, or drop cpus.server_budget_pct")
        return 2, root / PARENT
    for name in ("cpu", "cpu,cpuacct"):
        if (root / name / "cpu.cfs_quota_us").is_file():
            return 1, root / name / PARENT
    raise CgroupError(f"no cgroup CPU controller under {root} (neither v2 cpu.max nor v1 "
                      "cpu.cfs_quota_us); fix: mount cgroups, or drop cpus.server_budget_pct")


def recorded_group(ledger: Ledger, entry: dict, root: Path | None = None) -> Path | None:
    """The group a ledger's cgroup entry stands for: only the one named after the ledger's
    prefix, under wanbench's parent in the CPU hierarchy (CgroupError: there is none, nor any
    group); None for an entry that names any other."""
    if entry.get("name") != ledger.prefix:
        return None
    return cpu_hierarchy(root)[1] / ledger.prefix


def group_pids(group: Path) -> list[int]:
    """The processes in group (none when it is gone)."""
    try:
        return [int(pid) for pid in (group / "cgroup.procs").read_text().split()]
    except OSError:
        return []


class CpuBudget:
    """One cgroup holding one server to `pct` % of one CPU, enforced every `period_us`; it and
    its ledger exist from `with` on."""

    def __init__(self, pct: float, period_us: int, root: Path | None = None):
        check_budget(pct, period_us)
        self.version, self.parent = cpu_hierarchy(root)
        self.root, self.pct, self.period_us = root or CGROUP_ROOT, pct, period_us
        self.prefix = new_prefix()  # names the group and its ledger
        self.path = self.parent / self.prefix
        self.ledger: Ledger | None = None

    @property
    def quota_us(self) -> int:
        return round(self.period_us * self.pct / 100)

    def __enter__(self) -> CpuBudget:
        self._make_parent()
        self.ledger = Ledger.create(self.prefix, None, None)
        try:
            self.ledger.add({"kind": "cgroup", "name": self.prefix})
            self.path.mkdir()
            if self.version == 2:
                (self.path / "cpu.max").write_text(f"{self.quota_us} {self.period_us}\n")
            else:
                (self.path / "cpu.cfs_period_us").write_text(f"{self.period_us}\n")
                (self.path / "cpu.cfs_quota_us").write_text(f"{self.quota_us}\n")
        except BaseException:
            with contextlib.suppress(OSError):  # a group left stays in its ledger: topo clean
                self.remove()  # `with` does not exit what failed to enter
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def _make_parent(self) -> None:
        self.parent.mkdir(exist_ok=True)
        if self.version == 2:  # v2: a controller reaches a child only if its parent passes it
            for parent in (self.root, self.parent):
                control = parent / "cgroup.subtree_control"
                if "cpu" not in control.read_text().split():
                    control.write_text("+cpu\n")

    def admit(self, pids: list[int]) -> None:
        """Moves these processes, every thread of each, into the group. The PIDs are this
        process's view of them, which is how the kernel reads what it is written; a
        process in another network namespace is moved all the same (the hierarchy is
        seen from here, not from there)."""
        for pid in pids:
            try:
                (self.path / "cgroup.procs").write_text(f"{pid}\n")
            except ProcessLookupError:
                continue  # a worker that exited meanwhile

    def throttling(self) -> Throttling:
        fields = dict(line.split() for line in
                      (self.path / "cpu.stat").read_text().splitlines() if line.strip())
        held = (int(fields["throttled_usec"]) / 1e6 if self.version == 2
                else int(fields["throttled_time"]) / 1e9)
        return Throttling(int(fields["nr_periods"]), int(fields["nr_throttled"]), held)

    def remove(self) -> None:
        """Removes the group once its processes are gone (they have been stopped by then),
        then its ledger (kept while the group is: OSError)."""
        if self.ledger is None:
            return
        try:
            self.path.rmdir()
        except FileNotFoundError:
            pass
        self.ledger.remove()
