"""Names and addresses of a topology's objects: namespaces, interfaces, 198.18.0.0/15 plan,
and what a topology may write as an address."""

from __future__ import annotations

import ipaddress
import re
import secrets
from dataclasses import dataclass

from harness.topology.model import Topology, TopologyError

PREFIX_RE = re.compile(r"wb[0-9a-z]{2,8}")
# The plan (without a run prefix) that a cluster's machines and the checks before a run use
PLAN_PREFIX = "wbplan"
# Calibration's floor path: a veth pair between two throwaway namespaces of its own, where it
# meets no topology's addresses; in 198.18.0.0/24, below the first link's default subnet,
# so no default plan hands these out
CALIBRATION_NET = ipaddress.ip_network("198.18.0.252/30")
# Link index 0 is no topology's (they count from 1): the floor path's MAC addresses
FLOOR_LINK_INDEX = 0


def link_mac(index: int, side: str) -> str:
    """The MAC address of side ('a' or 'b') of link `index`'s host device, where the link's
    wiring sets one (wb-linkem over AF_XDP: the other host's neighbour entry names it).
    Locally administered (02:...); "wb" in the next two octets; unique per link within a
    run, whose namespaces are all a MAC is seen in."""
    return f"02:77:62:{index >> 8 & 0xff:02x}:{index & 0xff:02x}:{0xa if side == 'a' else 0xb:02x}"


def new_prefix() -> str:
    return "wb" + secrets.token_hex(3)


def check_prefix(prefix: str) -> str:
    if not PREFIX_RE.fullmatch(prefix):  # match() with $ would let "wbab\n" through
        raise TopologyError(f"run prefix {prefix!r}: use 'wb' then 2-8 lowercase letters or "
                            "digits (it starts every namespace and interface name)")
    return prefix


@dataclass(frozen=True)
class LinkPlan:
    name: str
    index: int
    a: str
    b: str
    a_dev: str
    b_dev: str
    subnet: ipaddress.IPv4Network
    a_addr: str
    b_addr: str

    def mac(self, side: str) -> str:
        return link_mac(self.index, side)


@dataclass(frozen=True)
class HostPlan:
    name: str
    netns: str
    block: ipaddress.IPv4Network
    addresses: tuple[str, ...]  # the first is the one others reach the host at


@dataclass(frozen=True)
class AddressPlan:
    prefix: str
    hosts: dict[str, HostPlan]
    links: list[LinkPlan]

    def peer_links(self, host: str) -> list[tuple[LinkPlan, str, str]]:
        """(link, this host's side 'a'|'b', the peer host) for every link of host."""
        out = []
        for link in self.links:
            if link.a == host:
                out.append((link, "a", link.b))
            elif link.b == host:
                out.append((link, "b", link.a))
        return out


def plan_addresses(topology: Topology, prefix: str) -> AddressPlan:
    check_prefix(prefix)
    links = []
    for k, (name, link) in enumerate(topology.links.items(), start=1):
        subnet = ipaddress.ip_network(link.subnet or f"198.18.{k}.0/24", strict=False)
        if subnet.num_addresses < 4:
            raise TopologyError(f"links.{name}.subnet {subnet}: needs at least a /30")
        first, second = list(subnet.hosts())[:2]
        links.append(LinkPlan(name, k, link.a, link.b, f"{prefix}-{k}a", f"{prefix}-{k}b",
                              subnet, str(first), str(second)))
    hosts = {}
    for i, (name, host) in enumerate(topology.hosts.items(), start=1):
        primary = ipaddress.ip_address(host.address or f"198.19.{i}.1")
        block = ipaddress.ip_network(f"{primary}/24", strict=False)
        addresses = tuple(str(primary + n) for n in range(host.source_addresses))
        if ipaddress.ip_address(addresses[-1]) not in block:
            raise TopologyError(f"hosts.{name}: {host.source_addresses} source addresses from "
                                f"{primary} do not fit in {block}; lower the count or address")
        hosts[name] = HostPlan(name, f"{prefix}-{name}", block, addresses)
    _check_disjoint(hosts, links)
    return AddressPlan(prefix, hosts, links)


def _check_disjoint(hosts: dict[str, HostPlan], links: list[LinkPlan]) -> None:
    nets = [(f"hosts.{h.name}", h.block) for h in hosts.values()]
    nets += [(f"links.{lk.name}", lk.subnet) for lk in links]
    for i, (where, net) in enumerate(nets):
        for other, net2 in nets[i + 1:]:
            if net.overlaps(net2):
                raise TopologyError(f"{where} ({net}) overlaps {other} ({net2}); "
                                    "give them distinct addresses")


def check_plan(topology: Topology) -> None:
    """TopologyError when a namespace topology's addresses cannot be planned (blocks that
    overlap, a subnet too small, source addresses past their block), before anything is up."""
    if not topology.loopback:
        plan_addresses(topology, PLAN_PREFIX)


def loopback_addresses(topology: Topology) -> dict[str, tuple[str, ...]]:
    """Loopback: the server is 127.0.0.1; client host i sources from 127.0.i.1 upward."""
    out = {}
    for i, (name, host) in enumerate(topology.hosts.items(), start=1):
        if host.role == "server":
            out[name] = ("127.0.0.1",)
        else:
            out[name] = tuple(f"127.0.{i}.{n}" for n in range(1, host.source_addresses + 1))
    return out


def host_addresses(topology: Topology) -> dict[str, tuple[str, ...]]:
    """Each host's addresses, first the one others reach it at: the plan's, which the run
    prefix (it only names namespaces) does not change. Hosts that are machines of a cluster
    run carry these, so a namespace test and real machines are addressed alike."""
    if topology.loopback:
        raise TopologyError(f"topology {topology.name} is loopback: its hosts share this "
                            f"machine's 127.0.0.1, which other machines cannot reach; give a "
                            f"namespace topology (e.g. topologies/dumbbell-wan.yaml)")
    return {name: host.addresses
            for name, host in plan_addresses(topology, PLAN_PREFIX).hosts.items()}
