"""Removing a run's objects: the ledger's list plus anything carrying the run's prefix."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from harness.topology.ledger import Ledger, is_alive, process_start_time

EMULATOR = "wb-linkem"


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True)


def netns_names() -> list[str]:
    out = _run(["ip", "netns", "list"]).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def emulator_pids(prefix: str) -> list[int]:
    """wb-linkem processes whose arguments name a namespace of this prefix."""
    marker = f"/run/netns/{prefix}-"
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and Path(os.fsdecode(argv[0])).name == EMULATOR and any(
                os.fsdecode(a).startswith(marker) for a in argv[1:]):
            pids.append(int(entry.name))
    return pids


def stop_process(pid: int, start_time: int | None, grace_s: float = 2.0) -> bool:
    """SIGTERM (the emulator writes its counters), SIGKILL after grace; False if not ours."""
    if start_time is None or process_start_time(pid) != start_time:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while process_start_time(pid) == start_time:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            deadline = float("inf")
        time.sleep(0.01)
    return True


def stop_emulators(ledger: Ledger) -> list[str]:
    """Stops the run's emulators, listed or found by prefix; they write counters on SIGTERM."""
    listed = {e["pid"]: e.get("start_time") for e in ledger.data["objects"]
              if e["kind"] == "process" and "pid" in e}
    for pid in emulator_pids(ledger.prefix):
        listed.setdefault(pid, process_start_time(pid))
    return [f"process {pid} ({EMULATOR})" for pid, start_time in listed.items()
            if stop_process(pid, start_time)]


def remove_run(ledger: Ledger) -> list[str]:
    """Tears down everything of ledger's run; returns what was removed. Safe to repeat."""
    prefix = ledger.prefix
    removed = stop_emulators(ledger)
    present = set(netns_names())
    names = [e["name"] for e in ledger.data["objects"] if e["kind"] == "netns"]
    names += [n for n in present if n.startswith(prefix + "-") and n not in names]
    for name in names:
        if name in present and _run(["ip", "netns", "delete", name]).returncode == 0:
            removed.append(f"netns {name}")
    # Links live inside the namespaces and go with them; one left in the root namespace by
    # an interrupted move still carries the prefix.
    out = _run(["ip", "-o", "link", "show"]).stdout
    for line in out.splitlines():
        dev = line.split(":")[1].strip().split("@")[0]
        if dev.startswith(prefix + "-") and _run(["ip", "link", "delete", dev]).returncode == 0:
            removed.append(f"link {dev}")
    for output in ledger.path.parent.glob(f"{prefix}-linkem-*"):
        output.unlink(missing_ok=True)
    ledger.remove()
    return removed


def clean_dead_runs(ledgers: list[Ledger]) -> dict[str, list[str]]:
    """Removes runs whose owner is gone (crashed, or detached by `topo up`); live ones stay."""
    return {ledger.prefix: remove_run(ledger) for ledger in ledgers
            if not is_alive(ledger.data.get("owner"))}
