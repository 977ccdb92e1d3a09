"""Whether a network namespace on this machine holds an IPv4 address (has it assigned to one
of its interfaces): the load-target rule's test for 198.18.0.0/15 (clients.targets).

Every namespace is looked at once (by its inode), in this order: the caller's own, the named
ones (`ip netns add`: bind mounts under /run/netns, which may hold no process at all), then
those of running processes (/proc/PID/ns/net: namespaces made by unshare, calibration's, a
container's). A namespace is read by `ip -j -4 addr show`, entered with nsenter. One that
cannot be read (not root, its process gone meanwhile) counts as holding nothing: a mistake
there refuses load, never lets it out. An address is not taken as held because bind() to it
succeeds: with net.ipv4.ip_nonlocal_bind set, any address binds."""

from __future__ import annotations

import ipaddress
import json
import subprocess
from collections.abc import Iterator
from itertools import chain
from pathlib import Path

OWN = Path("/proc/self/ns/net")
NAMED = Path("/run/netns")  # where `ip netns add` mounts the namespaces it names
PROCESSES = Path("/proc")
READ_TIMEOUT_S = 5.0


def holds(address: ipaddress.IPv4Address) -> bool:
    """True if an interface in some network namespace on this machine has this address."""
    return any(address in _addresses(ns) for ns in _namespaces())


def held(addresses: list[str]) -> list[str]:
    """Those of these IPv4 addresses that some namespace on this machine holds (what a cluster
    run asks each of its hosts)."""
    return [address for address in addresses if holds(ipaddress.IPv4Address(address))]


def _namespaces() -> Iterator[Path]:
    """A path to each network namespace of this machine, each once, the caller's first."""
    seen: set[tuple[int, int]] = set()
    candidates = chain([OWN], sorted(NAMED.glob("*")), PROCESSES.glob("[0-9]*/ns/net"))
    for path in candidates:
        try:
            status = path.stat()
        except OSError:  # the process ended, or its namespace is not ours to see
            continue
        if (status.st_dev, status.st_ino) not in seen:
            seen.add((status.st_dev, status.st_ino))
            yield path


def _addresses(namespace: Path) -> set[ipaddress.IPv4Address]:
    argv = ["ip", "-j", "-4", "addr", "show"]
    if namespace != OWN:
        argv = ["nsenter", f"--net={namespace}", *argv]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=READ_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return set()
    if done.returncode != 0:
        return set()
    return {ipaddress.IPv4Address(info["local"]) for link in json.loads(done.stdout or "[]")
            for info in link.get("addr_info", ()) if info.get("family") == "inet"}
