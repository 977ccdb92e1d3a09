"""The exact command lines that build a topology, per backend (what --dry-run prints). A
namespace's `ip netns add` is carried out as netns.create does it: the same namespace, its
inode recorded before it has a name."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from harness.topology.addressing import AddressPlan, LinkPlan
from harness.topology.backends import BACKENDS, EMULATOR_IO
from harness.topology.model import Link, Shaping, Topology
from harness.topology.netns import NETNS_DIR

# Bytes a backend's rate limiter counts per packet beyond the IP packet (Ethernet on veth).
LINK_LAYER_BYTES = {"netem": 14, "veth": 14, "wb-linkem": 0, "wb-linkem-xdp": 14}
# Scheduling of the emulator's threads. Links that hold packets for a release time run
# SCHED_FIFO, ahead of servers and clients as netem's softirq is, so releases are on time
# on a busy machine. Unshaped links run SCHED_BATCH: no preemption of the server on every
# packet, so one wake-up forwards tens of packets; with the link's busy_poll_us a thread
# that has just forwarded also keeps polling its TUN, yielding to any runnable task between
# polls, before it sleeps (docs/bench-wan.md, topologies/README.md).
TIMED_SCHED, UNTIMED_SCHED = "fifo:10", "batch"
TUN_TXQUEUE_PACKETS = 10000


@dataclass(frozen=True)
class Step:
    """One command; `creates` goes to the ledger before it runs; `spawn` keeps it running
    (its identity recorded before it runs: Ledger.spawn); a `creates` of kind netns is made
    by netns.create."""

    argv: list[str]
    creates: dict | None = None
    spawn: bool = False
    link: str | None = None
    notes: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return shlex.join(self.argv) + (" &" if self.spawn else "")


def ns_exec(netns: str, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", netns, *argv]


def host_steps(topology: Topology, plan: AddressPlan) -> list[Step]:
    steps = []
    for host in plan.hosts.values():
        ns = host.netns
        steps.append(Step(["ip", "netns", "add", ns], creates={"kind": "netns", "name": ns}))
        # No IPv6: router solicitations and DAD would be stray packets on measured links.
        # Clients that open a connection per request reuse TIME_WAIT ports and the whole
        # port range, or a sweep runs out of ports within a minute (these namespaces only).
        sysctls = ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1",
                   "net.ipv4.tcp_tw_reuse=1", "net.ipv4.ip_local_port_range=1024 65535"]
        if not topology.hosts[host.name].stack.timestamps:
            sysctls.append("net.ipv4.tcp_timestamps=0")
        steps.append(Step(ns_exec(ns, ["sysctl", "-qw", *sysctls])))
        steps.append(Step(["ip", "-n", ns, "link", "set", "lo", "up"]))
        steps += [Step(["ip", "-n", ns, "addr", "add", f"{addr}/32", "dev", "lo"])
                  for addr in host.addresses]
    return steps


def num(x: float) -> str:
    """A plain decimal (tc and the emulator both read it; no exponent, no trailing zeros)."""
    return f"{x:.6f}".rstrip("0").rstrip(".")


def netem_args(shaping: Shaping, limit: int) -> list[str]:
    args = ["limit", str(limit)]
    if shaping.delay_ms or shaping.jitter_ms:
        args += ["delay", f"{num(shaping.delay_ms)}ms"]
        if shaping.jitter_ms:
            args.append(f"{num(shaping.jitter_ms)}ms")
            if shaping.jitter_distribution == "normal":
                args += ["distribution", "normal"]
    if shaping.loss_pct:
        args += ["loss", f"{num(shaping.loss_pct)}%"]
    if shaping.rate_mbit:
        args += ["rate", f"{num(shaping.rate_mbit * 1000)}kbit"]
    return args


def linkem_spec(shaping: Shaping, limit: int) -> str:
    parts = {
        "delay_us": num(shaping.delay_ms * 1000),
        "jitter_us": num(shaping.jitter_ms * 1000),
        "dist": shaping.jitter_distribution,
        "loss": num(shaping.loss_pct / 100),
        "rate_bps": num((shaping.rate_mbit or 0) * 1e6),
        "limit": str(limit),
    }
    return ",".join(f"{k}={v}" for k, v in parts.items())


def linkem_options(spec: Link, io: str) -> list[str]:
    """How wb-linkem runs a link, whatever it shapes (the link and its calibration floor):
    its I/O back end, scheduling, busy-polling, and offloads (off: one MSS per packet, as
    segmentation_offload asks of veth)."""
    timed = spec.direction("a_to_b").is_timed or spec.direction("b_to_a").is_timed
    options = ["--io", io, "--sched", TIMED_SCHED if timed else UNTIMED_SCHED,
               "--offload", "on" if spec.segmentation_offload else "off"]
    return options + (["--busy-poll-us", str(spec.busy_poll_us)] if spec.busy_poll_us else [])


def queue_limits(topology: Topology, link: LinkPlan) -> dict[str, int]:
    spec = topology.links[link.name]
    rtt = spec.max_rtt_ms()
    return {d: spec.direction(d).limit_packets(rtt) for d in ("a_to_b", "b_to_a")}


@dataclass(frozen=True)
class PairEnd:
    """One host's side of a link wired for wb-linkem over AF_XDP, as the commands name it."""

    ip: list[str]  # `ip` run in the host's namespace (ip -n NAME, or nsenter ... ip)
    netns: str  # the host's namespace as `ip link add ... netns` takes it (a name or a pid)
    dev: str
    mac: str
    addr: str  # its address on the link


def xdp_pair_commands(side: PairEnd, far: PairEnd) -> list[list[str]]:
    """Host side's veth pair: its device, with the MAC far's neighbour entry names, and the far
    end of the same name in far's namespace, up: where wb-linkem's AF_XDP socket takes side's
    frames and gives it far's (`wb-linkem --io xdp`)."""
    return [[*side.ip, "link", "add", side.dev, "address", side.mac, "type", "veth", "peer",
             "name", side.dev, "netns", far.netns],
            [*far.ip, "link", "set", side.dev, "up"]]


def xdp_neighbour_command(side: PairEnd, far: PairEnd) -> list[str]:
    """side reaches far's link address at far's MAC with no ARP: frames cross the emulator
    unchanged, so ARP's would too, shaped (loss draws the TUN path, with no ARP, never
    makes: the same seed would drop other packets)."""
    return [*side.ip, "neigh", "replace", far.addr, "lladdr", far.mac, "dev", side.dev,
            "nud", "permanent"]


def pair_ends(plan: AddressPlan, link: LinkPlan) -> tuple[PairEnd, PairEnd]:
    ns_a, ns_b = plan.hosts[link.a].netns, plan.hosts[link.b].netns
    return (PairEnd(["ip", "-n", ns_a], ns_a, link.a_dev, link.mac("a"), link.a_addr),
            PairEnd(["ip", "-n", ns_b], ns_b, link.b_dev, link.mac("b"), link.b_addr))


def link_steps(topology: Topology, plan: AddressPlan, backend: str, linkem: Path,
               state_dir: Path) -> list[Step]:
    steps = []
    for link in plan.links:
        ns_a, ns_b = plan.hosts[link.a].netns, plan.hosts[link.b].netns
        spec = topology.links[link.name]
        limits = queue_limits(topology, link)
        wiring = BACKENDS[backend].wiring(spec)
        io = EMULATOR_IO.get(wiring)  # None: no emulator, a veth pair joins the hosts
        if io is None:
            steps.append(Step(["ip", "link", "add", link.a_dev, "netns", ns_a, "type", "veth",
                               "peer", "name", link.b_dev, "netns", ns_b],
                              creates={"kind": "link", "name": link.a_dev, "netns": ns_a}))
        if io == "xdp":
            a, b = pair_ends(plan, link)
            for side, far in ((a, b), (b, a)):
                create, up = xdp_pair_commands(side, far)
                steps += [Step(create, creates={"kind": "link", "name": side.dev,
                                                "netns": side.netns}), Step(up)]
        if io is not None:
            stats = state_dir / f"{plan.prefix}-linkem-{link.index}.json"
            argv = [str(linkem),
                    "--a-netns", str(NETNS_DIR / ns_a), "--a-dev", link.a_dev,
                    "--b-netns", str(NETNS_DIR / ns_b), "--b-dev", link.b_dev,
                    "--ab", linkem_spec(spec.direction("a_to_b"), limits["a_to_b"]),
                    "--ba", linkem_spec(spec.direction("b_to_a"), limits["b_to_a"]),
                    "--seed", str(topology.seed + link.index), "--stats", str(stats),
                    *linkem_options(spec, io)]
            steps.append(Step(argv, spawn=True, link=link.name, notes={"stats": str(stats)},
                              creates={"kind": "process", "name": "wb-linkem",
                                       "link": link.name}))
        for ns, dev, addr in ((ns_a, link.a_dev, link.a_addr), (ns_b, link.b_dev, link.b_addr)):
            if io == "tun":
                # The kernel's ring in front of the emulator: a burst (thousands of cold
                # clients' SYNs) must wait for the emulator there, not be dropped unseen.
                steps.append(Step(["ip", "-n", ns, "link", "set", "dev", dev,
                                   "txqueuelen", str(TUN_TXQUEUE_PACKETS)]))
            steps.append(Step(["ip", "-n", ns, "addr", "add",
                               f"{addr}/{link.subnet.prefixlen}", "dev", dev]))
            steps.append(Step(["ip", "-n", ns, "link", "set", dev, "up"]))
        if io == "xdp":
            a, b = pair_ends(plan, link)
            steps += [Step(xdp_neighbour_command(a, b)), Step(xdp_neighbour_command(b, a))]
        if wiring == "veth" and not spec.segmentation_offload:
            steps += [Step(["ip", "-n", ns, "link", "set", "dev", dev, "gso_max_segs", "1"])
                      for ns, dev in ((ns_a, link.a_dev), (ns_b, link.b_dev))]
        if wiring == "netem":
            for ns, dev, direction in ((ns_a, link.a_dev, "a_to_b"), (ns_b, link.b_dev, "b_to_a")):
                # One MSS per packet, as on the wire: netem would drop and rate-limit whole
                # 64 KB GSO bursts otherwise (wb-linkem counts a burst's wire packets).
                steps.append(Step(["ip", "-n", ns, "link", "set", "dev", dev,
                                   "gso_max_segs", "1"]))
                shaping = spec.direction(direction)
                if not shaping.is_plain:
                    steps.append(Step(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root",
                                       "netem", *netem_args(shaping, limits[direction])]))
    return steps


def route_steps(topology: Topology, plan: AddressPlan) -> list[Step]:
    """Each host reaches each neighbour's address block through their shared link."""
    steps = []
    for host in plan.hosts.values():
        # the route carries the host's ACKs: quickack there turns its delayed ACK off
        quickack = [] if topology.hosts[host.name].stack.delayed_ack else ["quickack", "1"]
        for link, side, peer in plan.peer_links(host.name):
            via = link.b_addr if side == "a" else link.a_addr
            steps.append(Step(["ip", "-n", host.netns, "route", "add",
                               str(plan.hosts[peer].block), "via", via,
                               "src", host.addresses[0], *quickack]))
    return steps


def build_steps(topology: Topology, plan: AddressPlan, backend: str, linkem: Path,
                state_dir: Path) -> list[Step]:
    return (host_steps(topology, plan) + link_steps(topology, plan, backend, linkem, state_dir)
            + route_steps(topology, plan))
