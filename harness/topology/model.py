"""Topology files: pydantic models, loaded with dotted overrides by harness.yamlfile."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, model_validator

from clients.targets import BENCHMARK_NET
from harness.yamlfile import Document, Override, Strict, YamlError, quote, split_assignment

ROLES = ("server", "hot", "cold")
MTU_BYTES = 1500
QUEUE_FLOOR_PACKETS = 1000
# Line rate assumed when a direction has no rate limit, to size its queue from the BDP.
UNLIMITED_RATE_MBIT = 10_000.0


class TopologyError(ValueError):
    """A topology file or override that cannot be used; the message names the fix."""


class ShapingOverride(Strict):
    """Per-direction settings; any field left out takes the link's value."""

    delay_ms: float | None = Field(default=None, ge=0)
    jitter_ms: float | None = Field(default=None, ge=0)
    jitter_distribution: Literal["uniform", "normal"] | None = None
    loss_pct: float | None = Field(default=None, ge=0, le=100)
    rate_mbit: float | None = Field(default=None, gt=0)
    queue_limit: int | None = Field(default=None, ge=1)


class Shaping(Strict):
    """What one direction of a link does to packets. queue_limit None = sized from BDP x1.5."""

    delay_ms: float = Field(default=0.0, ge=0)
    jitter_ms: float = Field(default=0.0, ge=0)
    jitter_distribution: Literal["uniform", "normal"] = "uniform"
    loss_pct: float = Field(default=0.0, ge=0, le=100)
    rate_mbit: float | None = Field(default=None, gt=0)
    queue_limit: int | None = Field(default=None, ge=1)

    @property
    def is_plain(self) -> bool:
        """True when the direction needs no shaping at all (no qdisc for netem)."""
        return (self.delay_ms, self.jitter_ms, self.loss_pct) == (0, 0, 0) and (
            self.rate_mbit is None and self.queue_limit is None
        )

    @property
    def is_timed(self) -> bool:
        """True when packets wait for a release time (delay, jitter or a rate limit)."""
        return bool(self.delay_ms or self.jitter_ms or self.rate_mbit)

    def limit_packets(self, rtt_ms: float) -> int:
        """Queue limit: explicit, else bandwidth-delay product x1.5 in MTU-sized packets."""
        if self.queue_limit is not None:
            return self.queue_limit
        rate_bps = (self.rate_mbit or UNLIMITED_RATE_MBIT) * 1e6
        bdp_packets = rate_bps * rtt_ms / 1000 / (8 * MTU_BYTES)
        return max(QUEUE_FLOOR_PACKETS, math.ceil(1.5 * bdp_packets))


class Link(Shaping):
    """A point-to-point link between hosts a and b; fields apply to both directions."""

    a: str
    b: str
    subnet: str | None = None
    a_to_b: ShapingOverride | None = None
    b_to_a: ShapingOverride | None = None
    # Userspace emulator, unshaped links: keep polling the TUN this long after forwarding
    # instead of sleeping (veth's throughput on a busy link, but the polling takes CPU from
    # a saturated server; topologies/README.md). 0: sleep.
    busy_poll_us: int = Field(default=0, ge=0, le=100_000)
    # Userspace backend: a link that shapes nothing is a plain veth pair, because the
    # emulator would only add its forwarding cost, taken from the server being measured
    # (73-78 % of a CPU on dumbbell-wan's 0 ms hot link at 85,000 replies/s, which capped
    # epoll there). True keeps the emulator on it, to measure the emulator itself.
    emulate_unshaped: bool = False
    # False: every packet is one MSS, as the papers' NICs without TSO sent them (veth:
    # gso_max_segs 1; wb-linkem: --offload off). True lets the stack hand the link 64 KB GSO
    # bursts as it would a NIC with TSO, so packets per byte depend on how much each
    # connection has queued. netem always gets single segments; wb-linkem forwards a GSO
    # segment whole where its shaping allows (topologies/README.md).
    segmentation_offload: bool = True

    @model_validator(mode="after")
    def _busy_poll_on_emulated_unshaped_links(self) -> Link:
        if not self.busy_poll_us:
            return self
        if any(self.direction(d).is_timed for d in ("a_to_b", "b_to_a")):
            raise ValueError("busy_poll_us applies to unshaped links only: a link with delay, "
                             "jitter or a rate runs real-time threads, which must sleep")
        if not self.emulate_unshaped:
            raise ValueError("busy_poll_us acts on the userspace emulator, and an unshaped "
                             "link is a plain veth pair unless it sets emulate_unshaped: true "
                             "(add it, e.g. --set links.NAME.emulate_unshaped=true)")
        return self

    @property
    def is_plain(self) -> bool:
        """True when neither direction shapes anything."""
        return self.direction("a_to_b").is_plain and self.direction("b_to_a").is_plain

    def direction(self, name: Literal["a_to_b", "b_to_a"]) -> Shaping:
        base = self.model_dump(include=set(Shaping.model_fields))
        override = getattr(self, name)
        if override is not None:
            base.update(override.model_dump(exclude_none=True))
        return Shaping(**base)

    def rtt_ms(self) -> float:
        """Configured round trip: the two one-way delays (jitter has median zero)."""
        return self.direction("a_to_b").delay_ms + self.direction("b_to_a").delay_ms

    def max_rtt_ms(self) -> float:
        return sum(self.direction(d).delay_ms + self.direction(d).jitter_ms
                   for d in ("a_to_b", "b_to_a"))


class HostStack(Strict):
    """What a host's TCP/IP stack does per packet, where a per-packet cost is measured."""

    # False: every segment is ACKed at once (route `quickack 1`): one ACK per segment, as
    # the cycles-per-packet study ran, so packets per byte do not vary with conditions.
    delayed_ack: bool = True
    # False: no TCP timestamp option, so a full segment carries 1460 bytes, not 1448.
    timestamps: bool = True
    # True: packets this host receives are processed on the CPU its processes are pinned to
    # (RPS), as on a machine with its own NIC. By default a veth pair processes them on the
    # sender's CPU, so the receiver's stack work is counted on the sender's side.
    receive_on_own_cpu: bool = False


class Host(Strict):
    role: Literal["server", "hot", "cold"]
    address: str | None = None
    source_addresses: int = Field(default=1, ge=1, le=250)
    stack: HostStack = Field(default_factory=HostStack)


class Topology(Strict):
    name: str
    description: str = ""
    loopback: bool = False
    seed: int = Field(default=1, ge=0)  # loss and jitter draws of the userspace emulator
    hosts: dict[str, Host]
    links: dict[str, Link] = Field(default_factory=dict)
    # the file it was read from (the ledger names it): set by load_topology, not by a file
    _source_file: str | None = PrivateAttr(default=None)

    @property
    def source_file(self) -> str | None:
        return self._source_file

    @model_validator(mode="after")
    def _check(self) -> Topology:
        for host in self.hosts:
            if not host.isascii() or not host.replace("_", "").isalnum() or len(host) > 12:
                raise ValueError(f"host name {host!r}: use up to 12 letters, digits or _")
        check_declared(self)
        if self.loopback:
            if self.links:
                raise ValueError("a loopback topology has no links; remove `links` "
                                 "or set `loopback: false`")
            tuned = [h for h, host in self.hosts.items() if host.stack != HostStack()]
            if tuned:
                raise ValueError(f"hosts {', '.join(tuned)}: a loopback topology's hosts "
                                 "share this machine's stack, so `stack` settings need "
                                 "namespaces; remove them or set `loopback: false`")
            return self
        if not self.links:
            raise ValueError("a namespace topology needs at least one link")
        for name, link in self.links.items():
            for end in (link.a, link.b):
                if end not in self.hosts:
                    raise ValueError(f"link {name!r}: unknown host {end!r}; "
                                     f"hosts are {sorted(self.hosts)}")
            if link.a == link.b:
                raise ValueError(f"link {name!r} joins host {link.a!r} to itself")
        linked = {end for link in self.links.values() for end in (link.a, link.b)}
        for host in self.hosts:
            if host not in linked:
                raise ValueError(f"host {host!r} is on no link; add a link to it")
        return self

    def role_hosts(self, role: str) -> list[str]:
        if role not in ROLES:
            raise TopologyError(f"unknown role {role!r}; roles are {', '.join(ROLES)}")
        return [name for name, host in self.hosts.items() if host.role == role]

    def client_hosts(self, load: str) -> list[str]:
        """The hosts that open the `load` ("hot" or "cold") connections: that role's, else
        the other client role's (a topology with one client host carries both)."""
        other = {"hot": "cold", "cold": "hot"}[load]
        return self.role_hosts(load) or self.role_hosts(other)




def parse_override(text: str) -> tuple[str, str]:
    """`wanbench topo up --set KEY=VALUE` as (KEY, VALUE)."""
    try:
        return split_assignment(text)
    except YamlError as exc:
        raise TopologyError(str(exc)) from None


def load_topology(path: str | Path, overrides: Mapping[str, Any] | None = None,
                  origin: str = "topology.set") -> Topology:
    """Reads a topology YAML file, applies dotted overrides (a value given as text is read as
    YAML), validates; TopologyError naming file:line, or the override, and the field."""
    path = Path(path)
    try:
        document = Document.load(path, "topology")
        for key, value in (overrides or {}).items():
            origin_of = f"{origin} {quote(f'{key}={value}')}"
            document.apply(Override.of(key, value, origin_of), Topology)
        topology = document.validate(Topology)
    except YamlError as exc:
        raise TopologyError(str(exc)) from None
    topology._source_file = str(path)
    return topology


def check_declared(topology: Topology) -> None:
    """The addresses a topology writes (its file, --set, a scenario's topology.set): a host's
    address is one IPv4 address and a link's subnet one IPv4 subnet, both in BENCHMARK_NET;
    a loopback topology writes none, its hosts being 127.0.0.1 and 127.0.i.x whatever it says
    (addressing.loopback_addresses). ValueError naming the field and the fix."""
    for name, host in topology.hosts.items():
        where = f"hosts.{name}.address"
        if host.address is not None and topology.loopback:
            raise ValueError(f"{where}: {host.address}: a loopback topology's hosts are "
                             f"127.0.0.1 (the server) and 127.0.i.x (client host i), whatever "
                             f"it says; remove the address, or use a namespace topology")
        if host.address is not None:
            _check_in_range(where, _address(where, host.address))
    for name, link in topology.links.items():
        if link.subnet is not None:
            where = f"links.{name}.subnet"
            _check_in_range(where, _subnet(where, link.subnet))


def _address(where: str, text: str) -> ipaddress.IPv4Address:
    try:
        return ipaddress.IPv4Address(text)
    except ValueError:
        pass
    try:
        given = ipaddress.IPv4Interface(text)
    except ValueError:
        raise ValueError(f"{where}: {text!r} is not an IPv4 address; give one of "
                         f"{BENCHMARK_NET}, e.g. 198.19.9.1") from None
    raise ValueError(f"{where}: {text!r} is a subnet, not an address; give one address, e.g. "
                     f"{where}={given.ip} (its host's block is the /24 around it)")


def _subnet(where: str, text: str) -> ipaddress.IPv4Network:
    try:
        return ipaddress.IPv4Network(text, strict=False)
    except ValueError:
        raise ValueError(f"{where}: {text!r} is not an IPv4 subnet; give one of "
                         f"{BENCHMARK_NET}, e.g. 198.18.9.0/24") from None


def _check_in_range(where: str, given: ipaddress.IPv4Address | ipaddress.IPv4Network) -> None:
    inside = (given.subnet_of(BENCHMARK_NET) if isinstance(given, ipaddress.IPv4Network)
              else given in BENCHMARK_NET)
    if not inside:
        raise ValueError(f"{where}: {given} is outside {BENCHMARK_NET}; wanbench only uses "
                         f"addresses in {BENCHMARK_NET} (RFC 2544 benchmarking range)")
