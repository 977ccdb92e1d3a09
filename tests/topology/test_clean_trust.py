"""`topo clean` does not trust its ledger blindly: it removes only namespaces carrying a valid
run prefix (the ledger's own, matching its file name) and stops only processes that are the
emulator it started (executable and start time as recorded). What runs inside a run's
namespaces after a crash (agents, orphaned servers) is stopped so the namespaces can go."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.topology.cleanup import clean_dead_runs, netns_names
from harness.topology.ledger import Ledger, process_identity, process_start_time
from tests.conftest import REPO, needs_root

pytestmark = needs_root


def topo_clean() -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", "topo", "clean"],
                          capture_output=True, text=True, cwd=REPO, timeout=60)


def alive(proc: subprocess.Popen) -> bool:
    return proc.poll() is None


def gone(proc: subprocess.Popen, timeout: float = 10) -> bool:
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        return False
    return True


@pytest.fixture
def namespaces() -> Iterator[list[str]]:
    """Namespaces a test adds; deleted afterwards whatever happened."""
    made: list[str] = []
    yield made
    for name in made:
        subprocess.run(["ip", "netns", "delete", name], capture_output=True)


def add_netns(made: list[str], name: str) -> str:
    subprocess.run(["ip", "netns", "add", name], check=True)
    made.append(name)
    return name


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen]]:
    started: list[subprocess.Popen] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def start(started: list[subprocess.Popen], argv: list[str]) -> subprocess.Popen:
    """Starts argv; returns once the process runs the last program named in argv (after
    `ip netns exec NAME sleep`, once sleep runs inside the namespace)."""
    proc = subprocess.Popen(argv, start_new_session=True)
    started.append(proc)
    program = Path(argv[-2] if argv[-1].isdigit() else argv[-1]).name
    deadline = time.monotonic() + 5
    while Path(os.readlink(f"/proc/{proc.pid}/exe")).name != program:
        assert time.monotonic() < deadline, f"{argv} did not start {program}"
        time.sleep(0.01)
    return proc


def write_ledger(directory: Path, file_prefix: str, data: dict) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{file_prefix}.json"
    path.write_text(json.dumps(data))
    return path


def crafted(prefix: str, netns: list[str], procs: list[dict]) -> dict:
    return {"prefix": prefix, "topology_file": None, "backend": "userspace", "owner": None,
            "created_at": 0, "info": {},
            "objects": [{"kind": "netns", "name": n} for n in netns]
                       + [{"kind": "process", "name": "wb-linkem", "link": "hot", **p}
                          for p in procs]}


def test_crafted_ledgers_touch_nothing_foreign(state_dir, namespaces, processes, tmp_path):
    tag = secrets.token_hex(3)
    foreign = add_netns(namespaces, f"foreign-test-ns-{tag}")
    victim_prefix = f"wbv{tag}"  # another run's namespace, claimed by a ledger not its own
    victim = add_netns(namespaces, f"{victim_prefix}-server")
    sleeper = start(processes, ["sleep", "60"])
    # a process whose executable is named like the emulator, but not one this run started
    fake_bin = tmp_path / "bin" / "wb-linkem"
    fake_bin.parent.mkdir()
    shutil.copy("/bin/sleep", fake_bin)
    lookalike = start(processes, [str(fake_bin), "60"])
    claims = [
        {"pid": sleeper.pid, "start_time": process_start_time(sleeper.pid)},
        process_identity(sleeper.pid),  # its real executable, recorded: still not an emulator
        {**process_identity(sleeper.pid), "exe": str(fake_bin)},  # lies about the executable
        {"pid": lookalike.pid, "start_time": process_start_time(lookalike.pid) + 1},
        {"pid": lookalike.pid, "start_time": process_start_time(lookalike.pid),
         "exe": "/usr/local/bin/wb-linkem"},  # not the executable recorded at spawn
    ]
    ledgers = [
        write_ledger(state_dir, f"wbc{tag}", crafted(f"wbc{tag}", [foreign, victim], claims)),
        # the prefix is not a run prefix: `foreign-*` must not be taken for its objects
        write_ledger(state_dir, f"wbf{tag}", crafted("foreign", [foreign], claims)),
        # a valid prefix in someone else's file: it would clean another run by its prefix
        write_ledger(state_dir, f"wbd{tag}", crafted(victim_prefix, [victim], claims)),
    ]
    try:
        for clean in (lambda: clean_dead_runs(Ledger.load_all(state_dir)), topo_clean):
            clean()
            present = set(netns_names())
            assert foreign in present and victim in present
            assert alive(sleeper) and alive(lookalike)
        out = topo_clean()
        assert out.returncode == 0, out.stderr
        assert "Traceback" not in out.stderr
        assert f"wbf{tag}.json" in out.stdout + out.stderr  # says what it left alone, and why
        assert "'foreign' is not a run prefix" in out.stdout + out.stderr
        assert f"wbd{tag}.json" in out.stdout + out.stderr
    finally:
        for path in ledgers:
            path.unlink(missing_ok=True)


def test_a_genuine_ledger_still_cleans_its_own(state_dir, no_leftovers, processes, tmp_path):
    ledger = Ledger.create(f"wb{secrets.token_hex(3)}", None, "userspace")
    no_leftovers.append(ledger.prefix)
    name = f"{ledger.prefix}-server"
    ledger.add({"kind": "netns", "name": name})
    subprocess.run(["ip", "netns", "add", name], check=True)
    stray = f"{ledger.prefix}-client"  # not in the ledger, but carries its prefix
    subprocess.run(["ip", "netns", "add", stray], check=True)
    fake_bin = tmp_path / "wb-linkem"  # stands in for the emulator: same executable name
    shutil.copy("/bin/sleep", fake_bin)
    emulator = start(processes, [str(fake_bin), "60"])
    entry = ledger.add({"kind": "process", "name": "wb-linkem", "link": "hot"})
    ledger.update(entry, **process_identity(emulator.pid))
    assert entry["exe"] == str(fake_bin)
    ledger.detach()
    removed = clean_dead_runs(Ledger.load_all(state_dir))[ledger.prefix]
    assert f"netns {name}" in removed and f"netns {stray}" in removed
    assert f"process {emulator.pid} (wb-linkem)" in removed
    assert gone(emulator)
    assert not any(n.startswith(ledger.prefix + "-") for n in netns_names())
    assert not ledger.path.exists()


def _run_with_sleeper_inside(state_dir: Path, no_leftovers: list[str],
                             processes: list[subprocess.Popen]):
    ledger = Ledger.create(f"wb{secrets.token_hex(3)}", None, "netem")
    no_leftovers.append(ledger.prefix)
    name = f"{ledger.prefix}-server"
    ledger.add({"kind": "netns", "name": name})
    subprocess.run(["ip", "netns", "add", name], check=True)
    inside = start(processes, ["ip", "netns", "exec", name, "sleep", "600"])
    outside = start(processes, ["sleep", "600"])  # not in the run's namespaces: stays
    ledger.detach()  # the owner is gone, as after a SIGKILL of the runner
    return ledger, name, inside, outside


def test_clean_stops_processes_inside_the_runs_namespaces(state_dir, no_leftovers, processes):
    ledger, name, inside, outside = _run_with_sleeper_inside(state_dir, no_leftovers, processes)
    removed = clean_dead_runs(Ledger.load_all(state_dir))[ledger.prefix]
    assert gone(inside), "a process inside the run's namespace outlived clean"
    assert f"netns {name}" in removed and name not in netns_names()
    assert any(item.startswith(f"process {inside.pid} ") for item in removed), removed
    assert alive(outside)


def test_topo_clean_stops_processes_inside_the_runs_namespaces(state_dir, no_leftovers,
                                                               processes):
    ledger, name, inside, outside = _run_with_sleeper_inside(state_dir, no_leftovers, processes)
    out = topo_clean()
    assert out.returncode == 0, out.stderr
    assert gone(inside), "a process inside the run's namespace outlived `topo clean`"
    assert f"{ledger.prefix}: removed netns {name}" in out.stdout.splitlines()
    assert name not in netns_names()
    assert alive(outside)


def test_sigkilled_run_with_a_server_inside_is_cleaned(no_leftovers, processes):
    """A real run: emulators, namespaces and a process left inside one of them."""
    from tests.topology.test_cleanup import run_objects, start_holder

    holder, prefix = start_holder(no_leftovers)
    holder.kill()
    holder.wait()
    inside = start(processes, ["ip", "netns", "exec", f"{prefix}-server", "sleep", "600"])
    out = topo_clean()
    assert out.returncode == 0, out.stderr
    assert gone(inside)
    assert run_objects(prefix) == ([], [])
