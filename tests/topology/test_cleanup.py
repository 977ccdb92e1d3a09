"""Crash safety: a killed run is cleaned from its ledger; nothing else is ever touched."""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import sys

import pytest

from harness.topology.netns import names as netns_names
from tests.conftest import REPO, needs_root
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
    status = json.loads(topo("status").stdout)
    assert [s["prefix"] for s in status] == [prefix] and status[0]["owner"] == "detached"
    assert set(status[0]["emulators"]) == {"cold"}  # the unshaped hot link is veth
    assert all(v.endswith("(running)") for v in status[0]["emulators"].values())
    inside = topo("exec", "cold", "--", "ping", "-c", "1", "-n", "198.19.1.1")
    assert inside.returncode == 0 and " 0% packet loss" in inside.stdout
    bad = topo("exec", "nosuch", "--", "true")
    assert bad.returncode == 2 and "unknown host 'nosuch'" in bad.stderr
    down = topo("down")
    assert f"removed netns {prefix}-cold" in down.stdout
    assert run_objects(prefix) == ([], [])
    assert topo("down").returncode == 2  # nothing up: says so


def test_emulator_refuses_bad_shaping(linkem):
    out = subprocess.run([str(linkem), "--a-netns", "/x", "--a-dev", "a", "--b-netns", "/y",
                          "--b-dev", "b", "--ab", "delay_us=-5"], capture_output=True, text=True)
    assert out.returncode == 2 and "bad shaping item 'delay_us'" in out.stderr
