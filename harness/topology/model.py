"""Topology files: pydantic models, dotted KEY=VALUE overrides, and loading with clear errors."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

ROLES = ("server", "hot", "cold")
MTU_BYTES = 1500
QUEUE_FLOOR_PACKETS = 1000
# Line rate assumed when a direction has no rate limit, to size its queue from the BDP.
UNLIMITED_RATE_MBIT = 10_000.0


class TopologyError(ValueError):
    """A topology file or override that cannot be used; the message names the fix."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ShapingOverride(_Strict):
    """Per-direction settings; any field left out takes the link's value."""

    delay_ms: float | None = Field(default=None, ge=0)
    jitter_ms: float | None = Field(default=None, ge=0)
    jitter_distribution: Literal["uniform", "normal"] | None = None
    loss_pct: float | None = Field(default=None, ge=0, le=100)
    rate_mbit: float | None = Field(default=None, gt=0)
    queue_limit: int | None = Field(default=None, ge=1)


class Shaping(_Strict):
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


# What joins a link's two ends: a veth pair, a veth pair with netem qdiscs, or the
# userspace emulator between two TUN devices (Link.wiring decides which).
Wiring = Literal["veth", "netem", "wb-linkem"]


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
    # gso_max_segs 1). True lets the stack hand the link 64 KB GSO bursts as it would a NIC
    # with TSO, so packets per byte depend on how much each connection has queued. netem
    # and the emulator's TUN always get single segments.
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

    def wiring(self, backend: str) -> Wiring:
        """What joins the two ends under a topology backend (the one place that decides)."""
        if backend == "userspace" and (self.emulate_unshaped or not self.is_plain):
            return "wb-linkem"
        if backend == "netem" and not self.is_plain:
            return "netem"
        return "veth"

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


class HostStack(_Strict):
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


class Host(_Strict):
    role: Literal["server", "hot", "cold"]
    address: str | None = None
    source_addresses: int = Field(default=1, ge=1, le=250)
    stack: HostStack = Field(default_factory=HostStack)


class Topology(_Strict):
    name: str
    description: str = ""
    loopback: bool = False
    seed: int = Field(default=1, ge=0)  # loss and jitter draws of the userspace emulator
    hosts: dict[str, Host]
    links: dict[str, Link] = Field(default_factory=dict)
    source_file: str | None = None

    @model_validator(mode="after")
    def _check(self) -> Topology:
        for host in self.hosts:
            if not host.isascii() or not host.replace("_", "").isalnum() or len(host) > 12:
                raise ValueError(f"host name {host!r}: use up to 12 letters, digits or _")
        # the address policy is the addressing module's, which imports this one
        from harness.topology.addressing import check_declared

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


def apply_override(data: dict, key: str, value: str) -> None:
    """Sets a dotted key (e.g. links.cold.delay_ms) in raw topology data, in place."""
    parts = key.split(".")
    if not all(parts):
        raise TopologyError(f"override {key}={value}: empty part in key {key!r}")
    node = data
    for depth, part in enumerate(parts[:-1]):
        child = node.get(part) if isinstance(node, dict) else None
        if child is None:
            parent = ".".join(parts[:depth]) or "the top level"
            if isinstance(node, dict) and part in ("a_to_b", "b_to_a"):
                child = node[part] = {}
            else:
                known = ", ".join(sorted(node)) if isinstance(node, dict) else "nothing"
                raise TopologyError(f"override {key}={value}: no {part!r} under {parent}; "
                                    f"known: {known}")
        node = child
    if not isinstance(node, dict):
        raise TopologyError(f"override {key}={value}: {'.'.join(parts[:-1])} is not a section")
    node[parts[-1]] = yaml.safe_load(value) if value != "" else None


def _fields_at(loc: tuple) -> list[str]:
    """Field names allowed where an unknown key was found (for the error message)."""
    in_hosts = loc[:1] == ("hosts",)
    model = {0: Topology, 2: Host if in_hosts else Link,
             3: HostStack if in_hosts else ShapingOverride}.get(len(loc) - 1, Topology)
    return sorted(set(model.model_fields) - {"source_file"})


def _describe_error(err: dict) -> str:
    where = ".".join(str(p) for p in err["loc"]) or "topology"
    if err["type"] == "extra_forbidden":
        return f"{where}: unknown field; allowed: {', '.join(_fields_at(err['loc']))}"
    got = f" (got {err['input']!r})" if err["type"] != "missing" and err["loc"] else ""
    return f"{where}: {err['msg']}{got}"


def parse_override(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise TopologyError(f"override {text!r}: write KEY=VALUE, e.g. links.cold.delay_ms=50")
    return key.strip(), value.strip()


def load_topology(path: str | Path, overrides: dict[str, str] | None = None) -> Topology:
    """Reads a topology YAML file, applies dotted overrides, validates; TopologyError if bad."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise TopologyError(f"cannot read topology {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise TopologyError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise TopologyError(f"{path}: expected a mapping with `name`, `hosts`, `links`")
    for key, value in (overrides or {}).items():
        apply_override(data, key, str(value))
    data["source_file"] = str(path)
    try:
        return Topology.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(_describe_error(err) for err in exc.errors())
        given = f" with overrides {overrides}" if overrides else ""
        raise TopologyError(f"{path}{given}: {problems}") from None
