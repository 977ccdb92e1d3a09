"""A run's network namespaces: each made so that its ledger holds its identity (the namespace's
inode) before its name exists, and known afterwards by name and inode together.

`ip netns add` would create the namespace and its name at once, leaving a moment in which a
killed run has a namespace its ledger cannot tell from a stranger's. Instead a holder process
enters a new namespace, its inode goes to the ledger, and only then is the namespace given its
name (`ip netns attach`, which refuses a name that exists). The holder exits when its stdin
closes, so a creation cut short at any step leaves no name, or the name with its inode recorded;
a namespace never named goes away with the holder.

`ip netns attach` itself takes two steps: it creates the name as an empty file (refusing one
that exists), then mounts the namespace on it. Cut between them (a stop signal reaches the
whole process group) it leaves a half-made name, a plain file that `ip netns list` shows and
complains about ("Peer netns reference is invalid"). The ledger says `naming` before attach
runs, when the name did not exist yet; create removes a half-made name when attach fails or
is cut short, and `topo clean` removes one that its ledger was naming (half_made).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from harness.topology.ledger import Ledger
from harness.topology.model import TopologyError

NETNS_DIR = Path("/run/netns")
# Alone in a new network namespace until its stdin closes (when its creator is done or dies).
# "ready" is printed after unshare(): until then /proc/PID/ns/net is its parent's namespace.
HOLDER = ["unshare", "--net", "--", "sh", "-c", "echo ready; exec cat >/dev/null"]


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True)


def names() -> list[str]:
    """The named namespaces (`ip netns list`), whoever made them."""
    out = _run(["ip", "netns", "list"]).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def inode(name: str) -> int | None:
    """The inode of the namespace named name; None when there is no such name (or only a
    half-made one)."""
    try:
        status = os.stat(NETNS_DIR / name)
    except OSError:
        return None
    return None if _is_plain(status) else status.st_ino


def half_made(name: str) -> bool:
    """True when name is a plain file in NETNS_DIR, no namespace mounted on it: what
    `ip netns attach` leaves when it is cut short between its two steps."""
    try:
        return _is_plain(os.stat(NETNS_DIR / name))
    except OSError:
        return False


def _is_plain(status: os.stat_result) -> bool:
    """A namespace mounted on a name lives on nsfs; a plain file on the directory's own
    file system."""
    try:
        return status.st_dev == os.stat(NETNS_DIR).st_dev
    except OSError:
        return False


def pids(name: str) -> list[int]:
    """Processes inside the namespace named name."""
    out = _run(["ip", "netns", "pids", name]).stdout
    return [int(word) for word in out.split() if word.isdigit()]


def _attach(name: str, pid: int) -> None:
    done = _run(["ip", "netns", "attach", name, str(pid)])
    if done.returncode != 0:
        raise TopologyError(f"`ip netns attach {name} {pid}` failed: "
                            f"{done.stderr.strip() or done.returncode}")


def create(ledger: Ledger, name: str) -> None:
    """Makes namespace name, as `ip netns add` would, recording it in ledger first: the entry,
    then the new namespace's inode, then the name. TopologyError when it cannot."""
    entry = ledger.add({"kind": "netns", "name": name})
    holder = subprocess.Popen(HOLDER, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        if holder.stdout.readline().strip() != "ready":
            raise TopologyError(f"namespace {name}: `unshare --net` failed: "
                                f"{holder.stderr.read().strip() or 'no output'}")
        ledger.update(entry, inode=os.stat(f"/proc/{holder.pid}/ns/net").st_ino)
        if inode(name) is not None or half_made(name):
            raise TopologyError(f"namespace {name} exists already (not made by this run); "
                                f"fix: `wanbench topo clean`, or `ip netns delete {name}`")
        ledger.update(entry, naming=True)
        try:
            _attach(name, holder.pid)
        except BaseException:  # failed or cut short: a name attach left half made goes
            if half_made(name):
                (NETNS_DIR / name).unlink(missing_ok=True)
            raise
    finally:
        holder.stdin.close()  # the holder exits; a named namespace stays
        holder.wait()
        holder.stdout.close()
        holder.stderr.close()


def delete(name: str) -> bool:
    return _run(["ip", "netns", "delete", name]).returncode == 0
