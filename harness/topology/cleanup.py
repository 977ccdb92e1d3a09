"""Removing a run's objects: the ledger's list plus anything carrying the run's prefix.

A ledger is a file anyone with write access to the state directory could have written, so
it is trusted only as far as it can be checked: it must be one of a valid run prefix, named
after it (Ledger.problem); only namespaces carrying that prefix are deleted, and only
processes that still are the emulator it started (same start time, an executable named
wb-linkem, the one recorded at spawn) are stopped. Whatever runs inside the run's namespaces
is stopped before they are deleted: a namespace lives on while a process holds it.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from harness.topology.ledger import (
    Ledger,
    is_alive,
    process_exe,
    process_start_time,
)
from harness.topology.model import TopologyError

EMULATOR = "wb-linkem"
NETNS_DIR = Path("/run/netns")
GRACE_S = 2.0  # SIGTERM to SIGKILL: the emulator writes its counters on SIGTERM
KILL_WAIT_S = 5.0  # after SIGKILL: only a process stuck in the kernel takes longer
NETNS_ROUNDS = 3  # a process may fork while being stopped: look again


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True)


def netns_names() -> list[str]:
    out = _run(["ip", "netns", "list"]).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def is_emulator(pid: int, start_time: int | None, exe: str | None = None) -> bool:
    """pid still is the emulator recorded as (start_time, exe): same start time, its
    executable named wb-linkem and, when the ledger recorded one, the same executable."""
    if not isinstance(pid, int) or start_time is None:
        return False
    if process_start_time(pid) != start_time:
        return False
    actual = process_exe(pid)
    if actual is None or Path(actual).name != EMULATOR:
        return False
    return exe is None or actual == exe


def emulator_pids(prefix: str) -> list[int]:
    """wb-linkem processes (by executable) whose arguments name a namespace of this prefix."""
    marker = f"{NETNS_DIR}/{prefix}-"
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        exe = process_exe(int(entry.name))
        if exe is None or Path(exe).name != EMULATOR:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(os.fsdecode(a).startswith(marker) for a in argv[1:]):
            pids.append(int(entry.name))
    return pids


def _exited(pidfd: int) -> bool:
    return bool(select.select([pidfd], [], [], 0)[0])


def stop_processes(candidates: dict[int, Callable[[int], bool]],
                   grace_s: float = GRACE_S) -> list[int]:
    """SIGTERM every pid whose check still says it is ours, SIGKILL those left after grace_s;
    returns the pids stopped. Signals go through a pidfd opened before the check, so a pid
    reused after the check is never signalled."""
    pidfds: dict[int, int] = {}
    for pid, ours in candidates.items():
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            continue  # gone
        if not ours(pid):
            os.close(pidfd)
            continue
        try:
            signal.pidfd_send_signal(pidfd, signal.SIGTERM)
        except ProcessLookupError:
            os.close(pidfd)
            continue
        pidfds[pid] = pidfd
    try:
        pending = dict(pidfds)
        deadline, killed = time.monotonic() + grace_s, False
        while pending:
            pending = {pid: fd for pid, fd in pending.items() if not _exited(fd)}
            if not pending:
                break
            if time.monotonic() > deadline:
                if killed:
                    break  # stuck in the kernel: nothing more a signal can do
                for fd in pending.values():
                    try:
                        signal.pidfd_send_signal(fd, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                deadline, killed = time.monotonic() + KILL_WAIT_S, True
            time.sleep(0.01)
    finally:
        for fd in pidfds.values():
            os.close(fd)
    return list(pidfds)


def stop_emulators(ledger: Ledger) -> list[str]:
    """Stops the run's emulators, listed or found by prefix; they write counters on SIGTERM.
    A listed pid is stopped only while it still is the emulator the run started."""
    if ledger.problem():
        return []
    recorded: dict[int, tuple[int | None, str | None]] = {}
    for entry in ledger.entries("process"):
        if isinstance(entry.get("pid"), int):
            recorded[entry["pid"]] = (entry.get("start_time"), entry.get("exe"))
    for pid in emulator_pids(ledger.prefix):
        recorded.setdefault(pid, (process_start_time(pid), process_exe(pid)))
    stopped = stop_processes({pid: (lambda p, ident=ident: is_emulator(p, *ident))
                              for pid, ident in recorded.items()})
    return [f"process {pid} ({EMULATOR})" for pid in stopped]


def netns_pids(name: str) -> list[int]:
    out = _run(["ip", "netns", "pids", name]).stdout
    return [int(word) for word in out.split() if word.isdigit()]


def _in_netns(pid: int, netns: os.stat_result) -> bool:
    try:
        mine = os.stat(f"/proc/{pid}/ns/net")
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (netns.st_dev, netns.st_ino)


def stop_netns_processes(name: str) -> list[str]:
    """Stops every process inside namespace name (ours: the run created it and nothing else
    enters it): calibration agents, servers and workers a killed runner left behind."""
    try:
        netns = os.stat(NETNS_DIR / name)
    except OSError:
        return []
    stopped: list[str] = []
    for _ in range(NETNS_ROUNDS):
        found = {pid: (process_start_time(pid), _comm(pid)) for pid in netns_pids(name)
                 if pid != os.getpid()}
        found = {pid: ident for pid, ident in found.items() if ident[0] is not None}
        if not found:
            break

        def ours(pid: int, found=found) -> bool:
            return process_start_time(pid) == found[pid][0] and _in_netns(pid, netns)

        stopped += [f"process {pid} ({found[pid][1]}) in netns {name}"
                    for pid in stop_processes({pid: ours for pid in found})]
    return stopped


def run_netns(ledger: Ledger, present: set[str]) -> list[str]:
    """The run's namespaces that exist: listed in the ledger or found, all by its prefix."""
    mark = ledger.prefix + "-"
    listed = [e.get("name") for e in ledger.entries("netns")]
    names = [n for n in listed if isinstance(n, str) and n.startswith(mark)]
    names += sorted(n for n in present if n.startswith(mark) and n not in names)
    return [n for n in names if n in present]


def remove_run(ledger: Ledger) -> list[str]:
    """Tears down everything of ledger's run; returns what was removed. Safe to repeat.
    Raises TopologyError for a ledger that cannot be one of ours (Ledger.problem)."""
    problem = ledger.problem()
    if problem:
        raise TopologyError(f"ledger {ledger.path} left alone: {problem}")
    prefix = ledger.prefix
    removed = stop_emulators(ledger)
    names = run_netns(ledger, set(netns_names()))
    for name in names:
        removed += stop_netns_processes(name)
    for name in names:
        if _run(["ip", "netns", "delete", name]).returncode == 0:
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


def untrusted(ledgers: list[Ledger]) -> dict[str, str]:
    """Ledger file -> why clean leaves it (and everything it names) alone."""
    return {str(ledger.path): problem for ledger in ledgers
            if (problem := ledger.problem())}


def clean_dead_runs(ledgers: list[Ledger]) -> dict[str, list[str]]:
    """Removes runs whose owner is gone (crashed, or detached by `topo up`); live ones stay,
    and so does everything a ledger that cannot be ours names (see untrusted)."""
    return {ledger.prefix: remove_run(ledger) for ledger in ledgers
            if not ledger.problem() and not is_alive(ledger.data.get("owner"))}
