"""The network namespaces of this machine as the load-target rule (clients.targets) needs
them: which one holds an IPv4 address (has it assigned to one of its interfaces), how one of
them routes an address, and which namespace is at the other end of one of its links.

Every namespace is looked at once (by its inode), in this order: the caller's own, the named
ones (`ip netns add`: bind mounts under /run/netns, which may hold no process at all), then
those of running processes (/proc/PID/ns/net: namespaces made by unshare, calibration's, a
container's). A namespace is read by `ip -j -d addr show` and asked `ip -j route get
fibmatch`, entered with nsenter. One that cannot be read (not root, its process gone
meanwhile) counts as holding nothing and routing nowhere: a mistake there refuses load, never
lets it out. An address is not taken as held because bind() to it succeeds: with
net.ipv4.ip_nonlocal_bind set, any address binds.

A link leads to another namespace on this machine when it is one end of a veth pair (the
other end found by the pair's interface indexes, each naming the other) or a TUN device that
a process here holds open together with a TUN device of the other namespace (wb-linkem
forwarding between the two: /proc/PID/fdinfo names each TUN it holds)."""

from __future__ import annotations

import ipaddress
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

OWN = Path("/proc/self/ns/net")
NAMED = Path("/run/netns")  # where `ip netns add` mounts the namespaces it names
PROCESSES = Path("/proc")
TUN_DEVICE = "/dev/net/tun"
READ_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Interface:
    index: int
    name: str
    kind: str  # "veth", "tun", … ("" for lo and devices without a link kind)
    peer_index: int | None  # a veth's other end, by its index in its own namespace
    addresses: frozenset[ipaddress.IPv4Address]


@dataclass(frozen=True)
class Namespace:
    path: Path  # how to enter it (nsenter --net=PATH)
    identity: tuple[int, int]  # (st_dev, st_ino) of the namespace
    interfaces: tuple[Interface, ...]

    def holds(self, address: ipaddress.IPv4Address) -> bool:
        return any(address in link.addresses for link in self.interfaces)

    def interface(self, name: str) -> Interface | None:
        return next((link for link in self.interfaces if link.name == name), None)


@dataclass(frozen=True)
class Route:
    """The route a namespace's kernel picks for an address (`ip route get fibmatch`)."""

    kind: str  # "unicast", "local", "blackhole", "unreachable", …
    destination: str  # the matched prefix; "default" for a default route
    device: str | None
    gateway: ipaddress.IPv4Address | None


def held(addresses: list[str]) -> list[str]:
    """Those of these IPv4 addresses that some namespace on this machine holds (what a cluster
    run asks each of its hosts)."""
    namespaces = machine()
    return [address for address in addresses
            if any(ns.holds(ipaddress.IPv4Address(address)) for ns in namespaces)]


def machine() -> list[Namespace]:
    """Every network namespace of this machine, read now, the caller's first."""
    return [ns for path, identity in _namespaces()
            if (ns := _read(path, identity)) is not None]


def identity(path: Path) -> tuple[int, int] | None:
    """The namespace's identity (device, inode), None if path names none we can see."""
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_dev, status.st_ino


def route(namespace: Path, address: ipaddress.IPv4Address) -> Route | None:
    """The route namespace takes to address; None when it has none (or cannot be asked)."""
    found = _ip(namespace, ["-j", "route", "get", "fibmatch", str(address)])
    if not found:
        return None
    entry = found[0]
    gateway = entry.get("gateway")
    return Route(kind=entry.get("type", "unicast"), destination=entry.get("dst", ""),
                 device=entry.get("dev"),
                 gateway=ipaddress.IPv4Address(gateway) if gateway else None)


def far_ends(here: Namespace, device: Interface,
             namespaces: list[Namespace]) -> list[Namespace]:
    """The namespaces of this machine at the other end of here's link device (none when it
    leads elsewhere: a physical port, a bridge, a tunnel out)."""
    if device.kind == "veth" and device.peer_index is not None:
        return [ns for ns in namespaces for link in ns.interfaces
                if link.kind == "veth" and link.index == device.peer_index
                and link.peer_index == device.index]
    if device.kind == "tun":
        partners = _tun_partners(device.name)
        return [ns for ns in namespaces if ns.identity != here.identity
                and any(link.kind == "tun" and link.name in partners for link in ns.interfaces)]
    return []


def _tun_partners(name: str) -> set[str]:
    """Names of the other TUN devices held open by a process that holds a TUN named name
    (name itself when such a process holds two of that name, one per namespace)."""
    partners: set[str] = set()
    for process in PROCESSES.glob("[0-9]*"):
        names = _tun_names(process)
        if name in names:
            names.remove(name)
            partners.update(names)
    return partners


def _tun_names(process: Path) -> list[str]:
    """The TUN devices a process holds open, by name (once per descriptor)."""
    names = []
    try:
        for fd in (process / "fd").iterdir():
            if str(fd.readlink()) == TUN_DEVICE:
                for line in (process / "fdinfo" / fd.name).read_text().splitlines():
                    if line.startswith("iff:"):
                        names.append(line.split(":", 1)[1].strip())
    except OSError:  # the process ended, or is not ours to look at
        pass
    return names


def _namespaces() -> Iterator[tuple[Path, tuple[int, int]]]:
    """A path to each network namespace of this machine, each once, the caller's first."""
    seen: set[tuple[int, int]] = set()
    candidates = chain([OWN], sorted(NAMED.glob("*")), PROCESSES.glob("[0-9]*/ns/net"))
    for path in candidates:
        found = identity(path)  # None: the process ended, or its namespace is not ours to see
        if found is not None and found not in seen:
            seen.add(found)
            yield path, found


def _read(path: Path, found: tuple[int, int]) -> Namespace | None:
    links = _ip(path, ["-j", "-d", "addr", "show"])
    if links is None:
        return None
    return Namespace(path, found, tuple(
        Interface(index=link["ifindex"], name=link["ifname"],
                  kind=link.get("linkinfo", {}).get("info_kind", ""),
                  peer_index=link.get("link_index"),
                  addresses=frozenset(ipaddress.IPv4Address(info["local"])
                                      for info in link.get("addr_info", ())
                                      if info.get("family") == "inet"))
        for link in links))


def _ip(namespace: Path, args: list[str]) -> list[dict] | None:
    """`ip ARGS`'s JSON in namespace; None if it cannot be asked or says no."""
    argv = ["ip", *args]
    if namespace != OWN:
        argv = ["nsenter", f"--net={namespace}", *argv]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=READ_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    try:
        return json.loads(done.stdout or "[]")
    except json.JSONDecodeError:
        return None
