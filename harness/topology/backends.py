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


def probe_netem(ledger: Ledger | None) -> dict:
    """Adds a netem qdisc to lo in a scratch namespace (ledgered, always removed)."""
    assert ledger is not None, "netem is probed in a namespace of the run's ledger"
    ns = f"{ledger.prefix}-probe"
    try:
        netns.create(ledger, ns)
    except TopologyError as exc:
        return {"ok": False, "error": str(exc)}
    try:
        tc = subprocess.run(["tc", "-n", ns, "qdisc", "add", "dev", "lo", "root", "netem",
                             "delay", "1ms"], capture_output=True, text=True)
    finally:
        netns.delete(ns)
    if tc.returncode != 0:
        return {"ok": False, "error": tc.stderr.strip() or f"tc exited {tc.returncode}"}
    return {"ok": True}


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
    """wb-linkem built, and its AF_XDP back end opens a veth pair in a scratch namespace (in
    the run's ledger, always removed) as a run would: the AF_XDP sockets and their UMEM, the
    XDP program loaded and attached (`wb-linkem --io xdp --check`)."""
    assert ledger is not None, "AF_XDP is probed in a namespace of the run's ledger"
    try:
        path = binary("wb-linkem")
    except MissingBinary as exc:
        return {"ok": False, "error": str(exc)}
    ns = f"{ledger.prefix}-xprobe"
    try:
        netns.create(ledger, ns)
    except TopologyError as exc:
        return {"ok": False, "error": str(exc)}
    try:
        pair = subprocess.run(["ip", "-n", ns, "link", "add", XDP_PROBE_DEVICES[0], "type",
                               "veth", "peer", "name", XDP_PROBE_DEVICES[1]],
                              capture_output=True, text=True)
        if pair.returncode != 0:
            return {"ok": False, "error": f"veth: {pair.stderr.strip()}"}
        where = str(netns.NETNS_DIR / ns)
        check = subprocess.run([str(path), "--io", "xdp", "--check",
                                "--a-netns", where, "--a-dev", XDP_PROBE_DEVICES[0],
                                "--b-netns", where, "--b-dev", XDP_PROBE_DEVICES[1]],
                               capture_output=True, text=True, timeout=30)
    finally:
        netns.delete(ns)
    if check.returncode != 0:
        said = check.stderr.strip().splitlines()
        return {"ok": False, "error": (said[-1] if said else f"exited {check.returncode}")
                .removeprefix("wb-linkem: ")}
    return {"ok": True, "binary": str(path)}


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
