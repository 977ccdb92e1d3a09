"""The link backends, one table (libevent's eventop): each backend's name, what it joins a
link's two ends with, the kernel modules it needs, the binary it runs and how it is probed.
Every other module asks this table (by name: BACKENDS[name]); backend_probe chooses among
its rows."""

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

# What joins a link's two ends: a veth pair, a veth pair with netem qdiscs, or the
# userspace emulator between two TUN devices (LinkBackend.wiring decides which).
Wiring = Literal["veth", "netem", "wb-linkem"]
Probe = Callable[[Ledger | None], dict]


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
USERSPACE = LinkBackend("userspace", namespaces=True, shapes=True, shaped_wiring="wb-linkem",
                        emulates_unshaped=True, modules=("tun",), binary="wb-linkem",
                        probe=probe_userspace)
VETH = LinkBackend("veth", namespaces=True, shapes=False, shaped_wiring="veth",
                   emulates_unshaped=False, modules=(), binary=None, probe=None)
NONE = LinkBackend("none", namespaces=False, shapes=False, shaped_wiring="veth",
                   emulates_unshaped=False, modules=(), binary=None, probe=None)
BACKENDS = {b.name: b for b in (NETEM, USERSPACE, VETH, NONE)}
AUTO = "auto"  # the first of AUTO_ORDER whose probe works (loopback: none)
AUTO_ORDER = (NETEM, USERSPACE)
CHOICES = (AUTO, *BACKENDS)  # what a scenario, `run --backend` and `topo up --backend` take
