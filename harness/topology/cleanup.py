"""Removing a run's objects: what its ledger recorded, each still the object it recorded.

A ledger is a file anyone with write access to the state directory could have written, so it
is acted on only as far as it can be checked: it must be named after a valid run prefix
(Ledger.problem), and an object it names is removed only while it still has the identity the
run recorded when it made it:

- a namespace: its name and the inode it was created with. netns.create writes the inode to the
  ledger before the namespace has a name, so a creation cut short leaves either no name (the
  namespace went with its holder) or the name with the inode recorded. A name carrying the
  prefix that is not listed, listed without an inode (it was never given one by the run) or
  listed with another inode (e.g. `ip netns attach PREFIX-x PID` on a stranger's process) is
  not ours: left alone, and reported. A half-made name (netns.half_made: an empty file, no
  namespace) is ours when the ledger says the run was naming it.
- a process (an emulator): pid, start time and executable (wb-linkem, the one recorded).
  Ledger.spawn records them before the program runs, so no emulator runs unrecorded.
- a CPU budget's cgroup: the group named after the ledger's prefix under wanbench's parent
  (cgroups.recorded_group); its owner's identity is the ledger's.

Processes inside a namespace or group of ours are the run's (servers, agents, generators a
killed runner left) and are stopped first: a namespace lives on while a process holds it, and a
group cannot be removed while it holds one. Interfaces live inside the namespaces and go with
them (a veth pair is created inside its namespaces by one request: none is ever out here).
Nothing is found by its name alone. What is ours but could not be removed keeps the ledger, so
a later clean tries again.
"""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.topology import cgroups, netns
from harness.topology.ledger import (
    Ledger,
    abandoned_claims,
    is_alive,
    process_exe,
    process_start_time,
)
from harness.topology.model import TopologyError

EMULATOR = "wb-linkem"
GRACE_S = 2.0  # SIGTERM to SIGKILL: the emulator writes its counters on SIGTERM
KILL_WAIT_S = 5.0  # after SIGKILL: only a process stuck in the kernel takes longer
MEMBER_ROUNDS = 3  # a process may fork while being stopped: look again


@dataclass
class Cleaned:
    """What cleaning a run did: removed, not ours (carrying its prefix: left alone), and what
    is ours but could not be removed (the ledger stays for another try)."""

    removed: list[str] = field(default_factory=list)
    not_ours: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


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
    """Stops the run's emulators, each only while it still is the one the run started (they
    write their counters on SIGTERM)."""
    if ledger.problem():
        return []
    recorded = {e["pid"]: (e.get("start_time"), e.get("exe"))
                for e in ledger.entries("process") if isinstance(e.get("pid"), int)}
    stopped = stop_processes({pid: (lambda p, ident=ident: is_emulator(p, *ident))
                              for pid, ident in recorded.items()})
    return [f"process {pid} ({EMULATOR})" for pid in stopped]


def stop_members(where: str, members: Callable[[], list[int]],
                 is_member: Callable[[int], bool]) -> list[str]:
    """Stops every process members() lists (of a namespace or group of ours), each only while
    it still has the start time it was found with and is_member says it still is one."""
    stopped: list[str] = []
    for _ in range(MEMBER_ROUNDS):
        found = {pid: (process_start_time(pid), _comm(pid)) for pid in members()
                 if pid != os.getpid()}
        found = {pid: ident for pid, ident in found.items() if ident[0] is not None}
        if not found:
            break

        def ours(pid: int, found=found) -> bool:
            return process_start_time(pid) == found[pid][0] and is_member(pid)

        stopped += [f"process {pid} ({found[pid][1]}) in {where}"
                    for pid in stop_processes({pid: ours for pid in found})]
    return stopped


def _in_netns(pid: int, namespace: os.stat_result) -> bool:
    try:
        theirs = os.stat(f"/proc/{pid}/ns/net")
    except OSError:
        return False
    return (theirs.st_dev, theirs.st_ino) == (namespace.st_dev, namespace.st_ino)


def sort_netns(ledger: Ledger, present: list[str]) -> tuple[list[str], list[str]]:
    """Of the present namespace names carrying ledger's prefix: (the run's: listed with the
    inode they have, the others, each with why it is not the run's)."""
    recorded: dict[str, set[int]] = {}  # a failed creation may list a name again
    naming: set[str] = set()  # names the run was giving when it stopped (netns.create)
    for entry in ledger.entries("netns"):
        inodes = recorded.setdefault(entry.get("name"), set())
        if isinstance(entry.get("inode"), int):
            inodes.add(entry["inode"])
        if entry.get("naming") is True:
            naming.add(entry.get("name"))
    ours, not_ours = [], []
    for name in present:
        if not name.startswith(ledger.prefix + "-"):
            continue
        inode = netns.inode(name)
        if name in naming and netns.half_made(name):
            ours.append(name)  # attach cut short: the name is an empty file, no namespace
        elif name not in recorded:
            not_ours.append(f"netns {name} (not in its ledger)")
        elif not recorded[name]:
            not_ours.append(f"netns {name} (its ledger recorded no inode: the run never "
                            "named it)")
        elif inode not in recorded[name]:
            not_ours.append(f"netns {name} (inode {inode}, not the run's "
                            f"{', '.join(map(str, sorted(recorded[name])))})")
        else:
            ours.append(name)
    return ours, not_ours


def remove_netns(name: str, cleaned: Cleaned) -> None:
    """Stops what runs in namespace name (checked to be ours), then deletes it."""
    try:
        namespace = os.stat(netns.NETNS_DIR / name)
    except OSError:
        return  # gone meanwhile
    cleaned.removed += stop_members(f"netns {name}", lambda: netns.pids(name),
                                    lambda pid: _in_netns(pid, namespace))
    if netns.delete(name):
        cleaned.removed.append(f"netns {name}")
    else:
        cleaned.failed.append(f"netns {name}")


def remove_groups(ledger: Ledger, cleaned: Cleaned) -> None:
    """Stops what runs in the run's CPU-budget groups (admitted by it), then removes them."""
    for entry in ledger.entries("cgroup"):
        try:
            group = cgroups.recorded_group(ledger, entry)
        except cgroups.CgroupError:
            return  # no CPU hierarchy, so no group
        if group is None:
            cleaned.not_ours.append(f"cgroup {entry.get('name')!r} (not named after the "
                                    "run's prefix)")
            continue
        if not group.is_dir():
            continue  # removed by its run, or never made
        cleaned.removed += stop_members(f"cgroup {group}", lambda g=group: cgroups.group_pids(g),
                                        lambda pid, g=group: pid in cgroups.group_pids(g))
        try:
            group.rmdir()
            cleaned.removed.append(f"cgroup {group}")
        except FileNotFoundError:
            pass
        except OSError as exc:
            cleaned.failed.append(f"cgroup {group} ({exc.strerror})")


def remove_run(ledger: Ledger) -> Cleaned:
    """Tears down everything of ledger's run that is still what the run made. Safe to repeat.
    Raises TopologyError for a ledger that cannot be one of ours (Ledger.problem)."""
    problem = ledger.problem()
    if problem:
        raise TopologyError(f"ledger {ledger.path} left alone: {problem}")
    cleaned = Cleaned(removed=stop_emulators(ledger))
    ours, cleaned.not_ours = sort_netns(ledger, netns.names())
    for name in ours:
        remove_netns(name, cleaned)
    remove_groups(ledger, cleaned)
    if not cleaned.failed:
        for output in ledger.path.parent.glob(f"{ledger.prefix}-linkem-*"):
            output.unlink(missing_ok=True)
        ledger.remove()
    return cleaned


def untrusted(ledgers: list[Ledger]) -> dict[str, str]:
    """Ledger file -> why clean leaves it (and everything it names) alone."""
    return {str(ledger.path): problem for ledger in ledgers
            if (problem := ledger.problem())}


def remove_abandoned_claims(directory: Path | None = None) -> list[str]:
    """Removes ledgers that never had their name: their creator died writing them, before
    anything they would have listed existed."""
    removed = []
    for claim in abandoned_claims(directory):
        claim.unlink(missing_ok=True)
        removed.append(str(claim))
    return removed


def clean_dead_runs(ledgers: list[Ledger]) -> dict[str, Cleaned]:
    """Removes runs whose owner is gone (crashed, or detached by `topo up`); live ones stay,
    and so does everything a ledger that cannot be ours names (see untrusted)."""
    return {ledger.prefix: remove_run(ledger) for ledger in ledgers
            if not ledger.problem() and not is_alive(ledger.data.get("owner"))}
