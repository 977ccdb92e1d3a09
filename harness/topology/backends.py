"""The link backends, one table (libevent's eventop): each backend's name, what it joins a
link's two ends with, the kernel modules it needs, the binary it runs and how it is probed.
Every other module asks this table (by name: BACKENDS[name]); backend_probe chooses among
its rows: netem where the kernel has it, else the userspace emulator over AF_XDP, else the
same emulator over TUN devices."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from clients.paths import MissingBinary, binary
from harness.topology import netns
from harness.topology.ledger import Ledger
from harness.topology.model import TopologyError

if TYPE_CHECKING:
    from harness.topology.model import Link

# What joins a link's two ends: a veth pair, a veth pair with netem qdiscs, the userspace
# emulator between two TUN devices, or the emulator between the far ends of two veth pairs
# over AF_XDP (LinkBackend.wiring decides which).
Wiring = Literal["veth", "netem", "wb-linkem", "wb-linkem-xdp"]
# wb-linkem's I/O back end (its --io) under each wiring that runs it
EMULATOR_IO: dict[str, str] = {"wb-linkem": "tun", "wb-linkem-xdp": "xdp"}
Probe = Callable[[Ledger | None], dict]
# The scratch veth pair the AF_XDP probe opens (inside a namespace of its own)
XDP_PROBE_DEVICES = ("wbxdpa", "wbxdpb")


def probe_in_scratch(ledger: Ledger | None, suffix: str,
                     commands: Callable[[str], list[list[str]]]) -> dict:
    """Runs the commands given for a scratch namespace (named PREFIX-suffix, in the run's
    ledger, always removed) in order: {"ok": True}, or the first failure's error."""
    assert ledger is not None, "a probe's scratch namespace is in the run's ledger"
    ns = f"{ledger.prefix}-{suffix}"
    try:
        netns.create(ledger, ns)
    except TopologyError as exc:
        return {"ok": False, "error": str(exc)}
    try:
        for argv in commands(ns):
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            if done.returncode != 0:
                return {"ok": False, "error": done.stderr.strip()
                        or f"{Path(argv[0]).name} exited {done.returncode}"}
    finally:
        netns.delete(ns)
    return {"ok": True}


def probe_netem(ledger: Ledger | None) -> dict:
    """Adds a netem qdisc to lo in a scratch namespace."""
    return probe_in_scratch(ledger, "probe", lambda ns: [
        ["tc", "-n", ns, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"]])


def probe_userspace(_: Ledger | None = None) -> dict:
    """wb-linkem built, and a TUN device to open."""
    try:
        path = binary("wb-linkem")
    except MissingBinary as exc:
        return {"ok": False, "error": str(exc)}
    try:
        os.close(os.open("/dev/net/tun", os.O_RDWR))
    except OSError as exc:
        return {"ok": False, "error": f"/dev/net/tun: {exc.strerror}; fix: modprobe tun"}
    return {"ok": True, "binary": str(path)}


def probe_xdp(ledger: Ledger | None) -> dict:
    """wb-linkem built, and its AF_XDP back end opens a veth pair in a scratch namespace as a
    run would: the AF_XDP sockets and their UMEM, the XDP program loaded and attached
    (`wb-linkem --io xdp --check`)."""
    try:
        path = binary("wb-linkem")
    except MissingBinary as exc:
        return {"ok": False, "error": str(exc)}
    a, b = XDP_PROBE_DEVICES
    result = probe_in_scratch(ledger, "xprobe", lambda ns: [
        ["ip", "-n", ns, "link", "add", a, "type", "veth", "peer", "name", b],
        [str(path), "--io", "xdp", "--check", "--a-netns", str(netns.NETNS_DIR / ns),
         "--a-dev", a, "--b-netns", str(netns.NETNS_DIR / ns), "--b-dev", b]])
    if not result["ok"]:
        return {**result, "error": result["error"].removeprefix("wb-linkem: ")}
    return {**result, "binary": str(path)}


@dataclass(frozen=True)
class LinkBackend:
    name: str
    namespaces: bool  # False: loopback only, no links at all
    shapes: bool  # it can delay, drop and rate-limit
    shaped_wiring: Wiring  # what joins a shaped link's ends (a plain link: a veth pair)
    # an unshaped link asking to be emulated (Link.emulate_unshaped) gets shaped_wiring too
    emulates_unshaped: bool
    modules: tuple[str, ...]  # besides veth: what a guest's kernel must load for it
    binary: str | None  # the emulator it runs, which takes CPU from the measured hosts
    probe: Probe | None  # None: nothing to try (it works wherever namespaces do)
    lacking: str = ""  # what a failed probe says of the machine, with the fix

    def wiring(self, link: Link) -> Wiring:
        """What joins the link's two ends under this backend (the one place that decides)."""
        if not link.is_plain or (link.emulate_unshaped and self.emulates_unshaped):
            return self.shaped_wiring
        return "veth"

    def binary_path(self) -> Path | None:
        """Its emulator's binary (MissingBinary with the fix when unbuilt); None without one."""
        return binary(self.binary) if self.binary else None


NETEM = LinkBackend("netem", namespaces=True, shapes=True, shaped_wiring="netem",
                    emulates_unshaped=False, modules=("sch_netem",), binary=None,
                    probe=probe_netem,
                    lacking="the kernel lacks sch_netem: use --backend userspace")
# wb-linkem over AF_XDP: no system call per packet received, one per batch sent. Its
# sockets and XDP program are built into the kernel (CONFIG_XDP_SOCKETS), not modules.
XDP = LinkBackend("xdp", namespaces=True, shapes=True, shaped_wiring="wb-linkem-xdp",
                  emulates_unshaped=True, modules=(), binary="wb-linkem", probe=probe_xdp,
                  lacking="AF_XDP on veth does not work here: use --backend userspace, the "
                          "same emulator over TUN devices")
# wb-linkem over TUN devices: a read and a write per packet; where AF_XDP is missing.
USERSPACE = LinkBackend("userspace", namespaces=True, shapes=True, shaped_wiring="wb-linkem",
                        emulates_unshaped=True, modules=("tun",), binary="wb-linkem",
                        probe=probe_userspace)
VETH = LinkBackend("veth", namespaces=True, shapes=False, shaped_wiring="veth",
                   emulates_unshaped=False, modules=(), binary=None, probe=None)
NONE = LinkBackend("none", namespaces=False, shapes=False, shaped_wiring="veth",
                   emulates_unshaped=False, modules=(), binary=None, probe=None)
BACKENDS = {b.name: b for b in (NETEM, XDP, USERSPACE, VETH, NONE)}
AUTO = "auto"  # the first of AUTO_ORDER whose probe works (loopback: none)
AUTO_ORDER = (NETEM, XDP, USERSPACE)
CHOICES = (AUTO, *BACKENDS)  # what a scenario, `run --backend` and `topo up --backend` take
