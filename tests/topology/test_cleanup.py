"""Crash safety: a killed run is cleaned from its ledger; nothing else is ever touched."""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.metrics.cpu import process_tree
from harness.topology.cgroups import CgroupError, cpu_hierarchy
from harness.topology.ledger import Ledger
from harness.topology.netns import names as netns_names
from tests.conftest import REPO, build, needs_root
from tests.topology.leftovers import emulator_pids

pytestmark = needs_root
DUMBBELL = str(REPO / "topologies/dumbbell-wan.yaml")
HOLDER = """
import sys, time
from harness.topology import bring_up, load_topology
with bring_up(load_topology(sys.argv[1]), "userspace", calibrate=False) as handle:
    print(handle.prefix, flush=True)
    time.sleep(120)
"""


def topo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", "topo", *args],
                          capture_output=True, text=True, cwd=REPO, timeout=60)


def start_holder(no_leftovers) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, DUMBBELL], stdout=subprocess.PIPE,
                            text=True, cwd=REPO)
    prefix = proc.stdout.readline().strip()
    assert prefix, "the holder did not bring the topology up"
    no_leftovers.append(prefix)
    return proc, prefix


def run_objects(prefix: str) -> tuple[list[str], list[int]]:
    """The run's namespaces (and any link of it left in this namespace) and emulators."""
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names = [n for n in netns_names() if n.startswith(prefix + "-")]
    names += [f"link {ln.split(':')[1].strip()}" for ln in links.splitlines()
              if ln.split(":")[1].strip().startswith(prefix + "-")]
    return names, emulator_pids(prefix)


@pytest.fixture
def outside_namespaces():
    """Namespaces wanbench did not make, one of them named like a wanbench run."""
    names = [f"outside-{secrets.token_hex(3)}", f"wb{secrets.token_hex(3)}-server"]
    for name in names:
        subprocess.run(["ip", "netns", "add", name], check=True)
    yield names
    for name in names:
        subprocess.run(["ip", "netns", "delete", name], capture_output=True)


def test_sigkill_then_clean_removes_the_run_and_nothing_else(no_leftovers, outside_namespaces):
    proc, prefix = start_holder(no_leftovers)
    proc.kill()
    proc.wait()
    namespaces, emulators = run_objects(prefix)
    # The crash left them behind: three namespaces, the cold link's emulator (hot is veth).
    assert len(namespaces) == 3 and len(emulators) == 1
    cleaned = topo("clean")
    assert cleaned.returncode == 0, cleaned.stderr
    assert f"{prefix}: removed netns {prefix}-server" in cleaned.stdout.splitlines()
    assert run_objects(prefix) == ([], [])
    assert set(outside_namespaces) <= set(netns_names())
    assert topo("clean").stdout == ""  # nothing left to do, still nothing else touched
    assert set(outside_namespaces) <= set(netns_names())


BUDGETED_RUN = f"""
name: killed
topology: {{file: {DUMBBELL}, set: {{links.cold.delay_ms: 5}}}}
server: {{dispatch: epoll}}
hot: {{generator: sclient, conns: 2, rate_rps: 100}}
cold: {{conns: 0}}
cpus: {{server: 0, generator: 1, server_budget_pct: 50}}
warmup_s: 0.2
duration_s: 60
"""


def budget_group_of(run: subprocess.Popen, parent: Path) -> Path | None:
    """The CPU budget's group that holds one of run's processes (its server), if any yet."""
    ours = set(process_tree(run.pid))
    for group in parent.iterdir() if parent.is_dir() else []:
        try:
            members = {int(pid) for pid in (group / "cgroup.procs").read_text().split()}
        except OSError:
            continue
        if members & ours:
            return group
    return None


def test_sigkill_of_a_budgeted_run_then_clean_leaves_nothing(no_leftovers, state_dir,
                                                             tmp_path):
    """A real run, killed in its measured window: its namespaces, emulator, the server's
    CPU-budget group and every ledger go with `topo clean`."""
    try:
        parent = cpu_hierarchy()[1]
    except CgroupError as exc:
        pytest.skip(str(exc))
    for binary in ("build/bin/wb-server", "build/bin/wb-sclient"):
        build(binary)
    scenario = tmp_path / "killed.yaml"
    scenario.write_text(BUDGETED_RUN)
    said = tmp_path / "run.stderr"
    with open(said, "w") as stderr:
        run = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", str(scenario),
                                "--out", str(tmp_path / "results"), "--backend", "userspace"],
                               cwd=REPO, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        deadline, group = time.monotonic() + 90, None
        while group is None and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
            group = budget_group_of(run, parent)
        assert group is not None, f"the run never admitted its server: {said.read_text()}"
        (topology,) = [ledger for ledger in Ledger.load_all(state_dir)
                       if ledger.data["info"].get("hosts")]
        no_leftovers.append(topology.prefix)
    finally:
        run.kill()
        run.wait()
    namespaces, emulators = run_objects(topology.prefix)
    assert len(namespaces) == 3 and len(emulators) == 1 and group.is_dir()  # all left behind
    cleaned = topo("clean")
    assert cleaned.returncode == 0, cleaned.stderr
    assert run_objects(topology.prefix) == ([], [])
    assert not group.exists(), cleaned.stdout
    assert Ledger.load_all(state_dir) == []


def test_clean_leaves_a_live_run_alone(no_leftovers):
    proc, prefix = start_holder(no_leftovers)
    try:
        cleaned = topo("clean")
        assert f"left alone (owner alive): {prefix}" in cleaned.stdout
        assert len(run_objects(prefix)[0]) == 3
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 143
    assert run_objects(prefix) == ([], [])  # SIGTERM tore it down itself


def test_sigint_tears_down(no_leftovers):
    proc, prefix = start_holder(no_leftovers)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    assert run_objects(prefix) == ([], [])


def test_cli_up_status_exec_down(no_leftovers):
    prefix = f"wb{secrets.token_hex(3)}"
    no_leftovers.append(prefix)
    up = topo("up", DUMBBELL, "--backend", "userspace", "--prefix", prefix, "--no-calibrate",
              "--set", "links.cold.delay_ms=5")
    assert up.returncode == 0, up.stderr
    summary = json.loads(up.stdout)
    assert summary["backend"] == "userspace"
    assert summary["hosts"]["server"]["addresses"] == ["198.19.1.1"]
    # a live run's CPU budget: listed by status, but not a topology exec or down could pick
    budget = Ledger.create(f"wb{secrets.token_hex(3)}", None, None)
    budget.add({"kind": "cgroup", "name": budget.prefix})
    status = {s["prefix"]: s for s in json.loads(topo("status", "--json").stdout)}
    assert set(status) == {prefix, budget.prefix} and status[prefix]["owner"] == "detached"
    assert len(status[budget.prefix]["cgroups"]) == 1
    assert status[budget.prefix]["cgroups"][0].endswith(f"{budget.prefix} (gone)")
    table = topo("status").stdout  # for people: a table, one row per ledger
    assert "topologies up" in table and prefix in table and "detached" in table
    status = status[prefix]
    assert set(status["emulators"]) == {"cold"}  # the unshaped hot link is veth
    assert all(v.endswith("(running)") for v in status["emulators"].values())
    inside = topo("exec", "cold", "--", "ping", "-c", "1", "-n", "198.19.1.1")
    assert inside.returncode == 0 and " 0% packet loss" in inside.stdout
    bad = topo("exec", "nosuch", "--", "true")
    assert bad.returncode == 2 and "unknown host 'nosuch'" in bad.stderr
    down = topo("down")
    assert f"removed netns {prefix}-cold" in down.stdout
    assert run_objects(prefix) == ([], [])
    again = topo("down")  # nothing up: says so
    assert again.returncode == 2 and "no topology up (found: none)" in again.stderr
    assert budget.path.exists()
    budget.remove()


def test_emulator_refuses_bad_shaping(linkem):
    out = subprocess.run([str(linkem), "--a-netns", "/x", "--a-dev", "a", "--b-netns", "/y",
                          "--b-dev", "b", "--ab", "delay_us=-5"], capture_output=True, text=True)
    assert out.returncode == 2 and "bad shaping item 'delay_us'" in out.stderr
