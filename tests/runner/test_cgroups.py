"""The server's CPU budget: cgroup v2 and v1 layouts (made-up hierarchies, both written as the
kernel expects), each group in a ledger before it exists, groups of runs whose owner is gone
removed by `topo clean` (whatever became of the owner's pid) and live ones kept, and a real
budget holding a busy loop to its share where this machine has a CPU controller."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.runner.run import MissingTool, preflight
from harness.scenario import ScenarioError, parse
from harness.topology import cgroups
from harness.topology.cgroups import CgroupError, CpuBudget, Throttling, cpu_hierarchy
from harness.topology.cleanup import clean_dead_runs
from harness.topology.ledger import Ledger, process_identity, process_start_time
from tests.conftest import REPO

# A run's budget, then a process admitted to it, both left behind when this is SIGKILLed.
BUDGETED = """
import subprocess, time
from harness.topology.cgroups import CpuBudget
budget = CpuBudget(50, 10_000).__enter__()
sleeper = subprocess.Popen(["sleep", "600"])
budget.admit([sleeper.pid])
print(budget.path, sleeper.pid, sep="\\n", flush=True)
time.sleep(600)
"""


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch) -> Path:
    """The budgets' ledgers of this test only (`topo clean` here sees no one else's)."""
    directory = tmp_path / "state"
    monkeypatch.setenv("WANBENCH_TOPO_STATE", str(directory))
    return directory


def empty(group: Path) -> None:
    """cgroupfs removes a group with its interface files; a made-up one must be emptied."""
    for file in group.iterdir():
        file.unlink()


def v2_root(tmp_path: Path) -> Path:
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("memory\n")
    return tmp_path


def v1_root(tmp_path: Path) -> Path:
    (tmp_path / "cpu,cpuacct").mkdir()
    (tmp_path / "cpu,cpuacct" / "cpu.cfs_quota_us").write_text("-1\n")
    return tmp_path


def test_v2_writes_cpu_max_and_passes_the_controller_down(tmp_path: Path):
    root = v2_root(tmp_path)
    (root / "wanbench").mkdir()
    (root / "wanbench" / "cgroup.subtree_control").write_text("")
    with CpuBudget(25, 20_000, root) as budget:
        assert budget.version == 2
        assert (budget.path / "cpu.max").read_text() == "5000 20000\n"
        assert "+cpu" in (root / "cgroup.subtree_control").read_text()
        assert "+cpu" in (root / "wanbench" / "cgroup.subtree_control").read_text()
        (budget.path / "cpu.stat").write_text(
            "usage_usec 900\nnr_periods 200\nnr_throttled 50\nthrottled_usec 250000\n")
        assert budget.throttling() == Throttling(200, 50, 0.25)
        empty(budget.path)
    assert not budget.path.exists()


def test_v1_writes_quota_and_period(tmp_path: Path):
    root = v1_root(tmp_path)
    with CpuBudget(50, 10_000, root) as budget:
        assert budget.version == 1
        assert budget.path.parent == root / "cpu,cpuacct" / "wanbench"
        assert (budget.path / "cpu.cfs_period_us").read_text() == "10000\n"
        assert (budget.path / "cpu.cfs_quota_us").read_text() == "5000\n"
        (budget.path / "cpu.stat").write_text(
            "nr_periods 10\nnr_throttled 4\nthrottled_time 3000000\n")
        assert budget.throttling() == Throttling(10, 4, 0.003)
        budget.admit([os.getpid()])
        assert (budget.path / "cgroup.procs").read_text() == f"{os.getpid()}\n"
        empty(budget.path)


@pytest.mark.parametrize("pct,period_us,shortest", [(35, 1_000, 2858), (15, 2_000, 6667)])
def test_a_quota_under_the_kernels_minimum_is_refused_not_clamped(tmp_path: Path, pct,
                                                                   period_us, shortest):
    # Clamped to 1 ms, 35 % of a 1 ms period would run the server unbudgeted.
    with pytest.raises(ValueError, match=f"make budget_period_us at least {shortest}"):
        CpuBudget(pct, period_us, v1_root(tmp_path))
    text = f"name: b\ncpus: {{server: 0, generator: 1, server_budget_pct: {pct}, " \
           f"budget_period_us: {period_us}}}\n"
    with pytest.raises(ScenarioError, match="under the kernel's 1000 µs minimum"):
        parse(text)
    parse(text.replace(f"budget_period_us: {period_us}", f"budget_period_us: {shortest}"))


def test_no_cpu_controller_names_the_fix(tmp_path: Path):
    with pytest.raises(CgroupError, match="drop cpus.server_budget_pct"):
        cpu_hierarchy(tmp_path)
    (tmp_path / "cgroup.controllers").write_text("io memory\n")
    with pytest.raises(CgroupError, match="without the cpu controller"):
        cpu_hierarchy(tmp_path)


def test_a_budget_is_in_a_ledger_before_its_group_exists_and_leaves_with_it(
        tmp_path: Path, state: Path, monkeypatch):
    root = v1_root(tmp_path)
    at_mkdir: list[list[tuple[dict, list[dict]]]] = []
    mkdir = Path.mkdir

    def spy(path: Path, *args, **kwargs):
        if path.parent.name == "wanbench":
            at_mkdir.append([(ledger.data["owner"], ledger.entries("cgroup"))
                             for ledger in Ledger.load_all(state)])
        return mkdir(path, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", spy)
    with CpuBudget(50, 10_000, root) as budget:
        recorded = [{"kind": "cgroup", "name": budget.path.name}]
        assert at_mkdir == [[(process_identity(os.getpid()), recorded)]]
        assert budget.path.parent == root / "cpu,cpuacct" / "wanbench"
        empty(budget.path)
    assert not budget.path.exists()
    assert Ledger.load_all(state) == []


def v2_parent(tmp_path: Path) -> Path:
    root = v2_root(tmp_path)
    (root / "wanbench").mkdir()
    (root / "wanbench" / "cgroup.subtree_control").write_text("")  # cgroupfs makes it
    return root


@pytest.mark.parametrize("make_root", [v1_root, v2_parent], ids=["v1", "v2"])
def test_clean_removes_the_groups_of_gone_owners_whatever_became_of_their_pid(
        tmp_path: Path, state: Path, monkeypatch, make_root):
    monkeypatch.setattr(cgroups, "CGROUP_ROOT", make_root(tmp_path))
    exited = subprocess.Popen(["sleep", "60"])
    gone = process_identity(exited.pid)
    exited.kill()
    exited.wait()
    me = process_identity(os.getpid())
    owners = {"gone": gone,
              "pid reused": {**me, "start_time": me["start_time"] - 1},  # an earlier process
              "alive": me}
    budgets = {}
    for who, owner in owners.items():
        budget = budgets[who] = CpuBudget(50, 10_000).__enter__()
        empty(budget.path)  # cgroupfs's files go with the group; made-up ones would not
        budget.ledger.data["owner"] = owner
        budget.ledger.save()
    # a ledger naming a group that is not its own: left alone
    claims = Ledger.create("wbclaims", None, None)
    claims.add({"kind": "cgroup", "name": budgets["alive"].path.name})
    claims.detach()
    cleaned = clean_dead_runs(Ledger.load_all(state))
    for who in ("gone", "pid reused"):
        budget = budgets[who]
        assert not budget.path.exists(), who
        assert f"cgroup {budget.path}" in cleaned[budget.ledger.prefix].removed
    assert budgets["alive"].path.is_dir()
    assert {ledger.prefix for ledger in Ledger.load_all(state)} == {
        budgets["alive"].ledger.prefix}
    budgets["alive"].__exit__(None, None, None)
    assert not budgets["alive"].path.exists() and Ledger.load_all(state) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need root")
def test_topo_clean_removes_a_killed_runs_group_and_what_runs_in_it(state: Path):
    try:
        cpu_hierarchy()
    except CgroupError as exc:
        pytest.skip(str(exc))
    child = subprocess.Popen([sys.executable, "-c", BUDGETED], stdout=subprocess.PIPE,
                             text=True, cwd=REPO)
    group, sleeper = Path(child.stdout.readline().strip()), int(child.stdout.readline())
    sleeper_started = process_start_time(sleeper)
    child.kill()
    child.wait()
    try:
        assert group.is_dir() and str(sleeper) in (group / "cgroup.procs").read_text()
        with CpuBudget(50, 10_000) as live:
            out = subprocess.run([sys.executable, "-m", "harness.cli", "topo", "clean"],
                                 capture_output=True, text=True, cwd=REPO, timeout=60)
            assert out.returncode == 0, out.stderr
            assert not group.exists(), out.stdout
            assert f"removed cgroup {group}" in out.stdout
            assert live.path.is_dir()
            assert f"left alone (owner alive): {live.ledger.prefix}" in out.stdout
        assert process_start_time(sleeper) != sleeper_started, "its process outlived clean"
        assert Ledger.load_all(state) == []
    finally:
        if process_start_time(sleeper) == sleeper_started:
            os.kill(sleeper, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while group.is_dir() and time.monotonic() < deadline:
            with contextlib.suppress(OSError):  # busy until the kill has landed
                group.rmdir()


@pytest.mark.timing
@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need root")
def test_a_real_budget_holds_a_busy_loop_to_its_share():
    try:
        cpu_hierarchy()
    except CgroupError as exc:
        pytest.skip(str(exc))
    spin = [sys.executable, "-c",
            "import time\nend = time.time() + 2\nwhile time.time() < end: pass"]
    with CpuBudget(30, 10_000) as budget:
        started = time.monotonic()
        proc = subprocess.Popen(["taskset", "-c", "0", *spin])
        budget.admit([proc.pid, 2**22 + 1])  # and one that no longer exists: skipped
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - started
        held = budget.throttling()
    assert status == 0
    used = usage.ru_utime + usage.ru_stime
    # 30 % of a CPU, give or take the period at the edges; unbudgeted it would use ~100 %
    assert used / wall < 0.4, f"used {used:.2f} s of CPU in {wall:.2f} s"
    assert held.throttled_periods > 0 and held.throttled_s > 0.5


def test_a_budget_without_a_cpu_controller_is_refused_before_anything_starts(
        tmp_path: Path, monkeypatch):
    monkeypatch.setattr(cgroups, "CGROUP_ROOT", tmp_path)  # nothing mounted there
    scenario = parse("name: b\ncpus: {server: 0, generator: 1, server_budget_pct: 40}\n")
    with pytest.raises(MissingTool, match="cpus.server_budget_pct: no cgroup CPU controller"):
        preflight(scenario)
    preflight(parse("name: b\n"))  # without a budget nothing is asked of cgroups
