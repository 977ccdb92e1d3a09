"""`topo clean` does not trust its ledger blindly: it acts only on a ledger named after a valid
run prefix, removes only namespaces it lists with the inode they were created with, and stops
only processes that are the emulator it started (executable and start time as recorded). What
runs inside a run's namespaces after a crash (agents, orphaned servers) is stopped so the
namespaces can go. A creation cut short by SIGKILL at any step leaves nothing behind."""

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

from harness.metrics.cpu import process_tree
from harness.topology import netns
from harness.topology.cleanup import clean_dead_runs
from harness.topology.ledger import Ledger, process_identity, process_start_time
from harness.topology.model import TopologyError
from harness.topology.netns import names as netns_names
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


@pytest.mark.parametrize("recorded", ["not listed", "listed without its inode",
                                      "listed with another inode"])
def test_a_strangers_namespace_under_the_runs_prefix_is_not_ours(state_dir, namespaces,
                                                                 processes, recorded):
    """The audit's case: a name carrying a dead run's prefix, attached to the namespace of a
    process wanbench never started. Neither the namespace nor its process is touched."""
    prefix = f"wb{secrets.token_hex(3)}"
    stranger = start(processes, ["unshare", "--net", "sleep", "600"])
    alias = f"{prefix}-alias"
    subprocess.run(["ip", "netns", "attach", alias, str(stranger.pid)], check=True)
    namespaces.append(alias)
    entry = {"kind": "netns", "name": alias}
    objects = {"not listed": [],
               "listed without its inode": [entry],
               "listed with another inode": [{**entry,
                                              "inode": os.stat("/proc/self/ns/net").st_ino}],
               }[recorded]
    write_ledger(state_dir, prefix, {**crafted(prefix, [], []), "objects": objects})
    out = topo_clean()
    assert out.returncode == 0, out.stderr
    assert alive(stranger), "clean killed a process in a namespace wanbench never made"
    assert alias in netns_names()
    assert f"{prefix}: not ours, left alone: netns {alias}" in out.stdout, out.stdout


def test_a_genuine_ledger_still_cleans_its_own(state_dir, no_leftovers, namespaces, processes,
                                               tmp_path):
    ledger = Ledger.create(f"wb{secrets.token_hex(3)}", None, "userspace")
    no_leftovers.append(ledger.prefix)
    name = f"{ledger.prefix}-server"
    netns.create(ledger, name)
    stray = add_netns(namespaces, f"{ledger.prefix}-client")  # carries its prefix, not listed
    fake_bin = tmp_path / "wb-linkem"  # stands in for the emulator: same executable name
    shutil.copy("/bin/sleep", fake_bin)
    entry = ledger.add({"kind": "process", "name": "wb-linkem", "link": "hot"})
    emulator = ledger.spawn(entry, [str(fake_bin), "60"])
    processes.append(emulator)
    assert entry["exe"] == str(fake_bin) and entry["pid"] == emulator.pid
    ledger.detach()
    cleaned = clean_dead_runs(Ledger.load_all(state_dir))[ledger.prefix]
    assert f"netns {name}" in cleaned.removed and name not in netns_names()
    assert f"process {emulator.pid} (wb-linkem)" in cleaned.removed
    assert gone(emulator)
    assert cleaned.not_ours == [f"netns {stray} (not in its ledger)"]
    assert stray in netns_names()
    assert not ledger.path.exists()


def test_a_namespace_is_in_the_ledger_with_its_inode_before_it_has_a_name(state_dir,
                                                                          no_leftovers,
                                                                          monkeypatch):
    ledger = Ledger.create(f"wb{secrets.token_hex(3)}", None, "netem")
    no_leftovers.append(ledger.prefix)
    name = f"{ledger.prefix}-server"
    at_attach = []
    attach = netns._attach

    def spy(attached: str, pid: int) -> None:
        at_attach.append((attached in netns_names(),
                          Ledger.load(ledger.path).entries("netns")))
        attach(attached, pid)

    monkeypatch.setattr(netns, "_attach", spy)
    netns.create(ledger, name)
    assert at_attach == [(False, [{"kind": "netns", "name": name,
                                   "inode": netns.inode(name), "naming": True}])]
    with pytest.raises(TopologyError, match="exists already"):  # never adopts a name
        netns.create(ledger, name)
    ledger.detach()
    clean_dead_runs([ledger])


def cut_between_attachs_steps(attached: str, pid: int) -> None:
    """`ip netns attach` stopped after creating the name, before mounting the namespace."""
    (netns.NETNS_DIR / attached).touch(exist_ok=False)
    raise KeyboardInterrupt


def test_a_name_attach_left_half_made_is_removed_at_once(state_dir, no_leftovers, monkeypatch):
    ledger = Ledger.create(f"wb{secrets.token_hex(3)}", None, "probe")
    no_leftovers.append(ledger.prefix)
    name = f"{ledger.prefix}-probe"
    monkeypatch.setattr(netns, "_attach", cut_between_attachs_steps)
    with pytest.raises(KeyboardInterrupt):
        netns.create(ledger, name)
    assert not (netns.NETNS_DIR / name).exists() and name not in netns_names()
    ledger.detach()
    clean_dead_runs([ledger])


def test_clean_removes_a_half_made_name_its_run_was_giving_and_no_other(state_dir,
                                                                        no_leftovers):
    """A run killed while `ip netns attach` was between its steps: the name is an empty file
    (every `ip netns list` then says "Peer netns reference is invalid"). Clean removes it when
    the ledger says the run was giving that name; a half-made name under the prefix that the
    ledger was not giving is a stranger's: left, and reported."""
    ledger = Ledger.create(f"wb{secrets.token_hex(3)}", None, "probe")
    no_leftovers.append(ledger.prefix)
    ours, theirs = f"{ledger.prefix}-probe", f"{ledger.prefix}-other"
    ledger.add({"kind": "netns", "name": ours, "inode": 1, "naming": True})
    ledger.add({"kind": "netns", "name": theirs, "inode": 2})
    try:
        for name in (ours, theirs):
            (netns.NETNS_DIR / name).touch(exist_ok=False)
        ledger.detach()
        cleaned = clean_dead_runs([ledger])[ledger.prefix]
        assert f"netns {ours}" in cleaned.removed
        assert not (netns.NETNS_DIR / ours).exists()
        assert (netns.NETNS_DIR / theirs).exists()
        assert any(theirs in line for line in cleaned.not_ours), cleaned.not_ours
    finally:
        for name in (ours, theirs):
            (netns.NETNS_DIR / name).unlink(missing_ok=True)


# Brings a topology up and stops for good right after `stage` of the first object of `kind`
# (its entry added, its identity recorded, a namespace attached), printing "paused".
CUT_SHORT = """
import sys, time
from harness.topology import bring_up, load_topology, netns
from harness.topology.ledger import Ledger

kind, stage, prefix, topology = sys.argv[1:]

def pause_after(owner, name, applies):
    original = getattr(owner, name)
    def paused(*args, **kwargs):
        result = original(*args, **kwargs)
        if applies(*args, **kwargs):
            print("paused", flush=True)
            time.sleep(600)
        return result
    setattr(owner, name, paused)

if stage == "attach":
    pause_after(netns, "_attach", lambda *a: True)
else:
    pause_after(Ledger, stage, lambda ledger, entry, **fields: entry["kind"] == kind
                and (stage == "add" or "pid" in fields or "inode" in fields))
bring_up(load_topology(topology), "userspace", prefix, calibrate=False)
"""


@pytest.mark.parametrize("kind,stage", [("netns", "add"), ("netns", "update"),
                                        ("netns", "attach"), ("process", "add"),
                                        ("process", "update")])
def test_a_creation_cut_short_by_sigkill_leaves_nothing(state_dir, no_leftovers, kind, stage):
    from tests.topology.test_cleanup import DUMBBELL, run_objects

    prefix = f"wb{secrets.token_hex(3)}"
    no_leftovers.append(prefix)
    builder = subprocess.Popen([sys.executable, "-c", CUT_SHORT, kind, stage, prefix, DUMBBELL],
                               stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert builder.stdout.readline().strip() == "paused", builder.wait()
    helpers = {pid: process_start_time(pid) for pid in process_tree(builder.pid)[1:]}
    builder.kill()
    builder.wait()
    out = topo_clean()
    assert out.returncode == 0, out.stderr
    assert "not ours" not in out.stdout, out.stdout
    assert run_objects(prefix) == ([], [])
    deadline = time.monotonic() + 5  # a holder or gate sees end of file and exits
    while any(process_start_time(pid) == started for pid, started in helpers.items()):
        assert time.monotonic() < deadline, f"left running: {helpers}"
        time.sleep(0.05)


def _run_with_sleeper_inside(state_dir: Path, no_leftovers: list[str],
                             processes: list[subprocess.Popen]):
    ledger = Ledger.create(f"wb{secrets.token_hex(3)}", None, "netem")
    no_leftovers.append(ledger.prefix)
    name = f"{ledger.prefix}-server"
    netns.create(ledger, name)
    inside = start(processes, ["ip", "netns", "exec", name, "sleep", "600"])
    outside = start(processes, ["sleep", "600"])  # not in the run's namespaces: stays
    ledger.detach()  # the owner is gone, as after a SIGKILL of the runner
    return ledger, name, inside, outside


def test_clean_stops_processes_inside_the_runs_namespaces(state_dir, no_leftovers, processes):
    ledger, name, inside, outside = _run_with_sleeper_inside(state_dir, no_leftovers, processes)
    removed = clean_dead_runs(Ledger.load_all(state_dir))[ledger.prefix].removed
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
