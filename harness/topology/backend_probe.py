"""Which link backend works here: netem tried in a scratch namespace, then the TUN emulator."""

from __future__ import annotations

import os
import subprocess

from clients.paths import MissingBinary, binary
from harness.topology import cleanup, netns
from harness.topology.addressing import new_prefix
from harness.topology.ledger import Ledger
from harness.topology.model import Topology, TopologyError

BACKENDS = ("auto", "netem", "userspace", "veth", "none")


def probe_netem(ledger: Ledger) -> dict:
    """Adds a netem qdisc to lo in a scratch namespace (ledgered, always removed)."""
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


def probe_userspace() -> dict:
    try:
        path = binary("wb-linkem")
    except MissingBinary as exc:
        return {"ok": False, "error": str(exc)}
    try:
        os.close(os.open("/dev/net/tun", os.O_RDWR))
    except OSError as exc:
        return {"ok": False, "error": f"/dev/net/tun: {exc.strerror}; fix: modprobe tun"}
    return {"ok": True, "binary": str(path)}


def check_unshaped(topology: Topology) -> None:
    """Plain veth (a fast baseline on any kernel) cannot delay, drop or rate-limit."""
    shaped = [n for n, lk in topology.links.items() if not lk.is_plain]
    if shaped:
        raise TopologyError(f"backend veth cannot shape; links {', '.join(shaped)} have "
                            "delay, jitter, loss, rate or a queue limit: use netem or userspace")


def choose_backend(requested: str, topology: Topology,
                   ledger: Ledger | None) -> tuple[str, dict]:
    """Returns (backend, probe record); TopologyError with the reasons when none fits."""
    if requested not in BACKENDS:
        raise TopologyError(f"backend {requested!r}: choose one of {', '.join(BACKENDS)}")
    if topology.loopback:
        if requested not in ("auto", "none"):
            raise TopologyError(f"backend {requested!r}: a loopback topology has no links to "
                                "emulate; use --backend none (or auto)")
        return "none", {"chosen": "none", "reason": "loopback topology: no namespaces"}
    if requested == "none":
        raise TopologyError("backend none is only for loopback topologies; use auto, netem "
                            "or userspace")
    if requested == "veth":
        check_unshaped(topology)
    if os.geteuid() != 0:
        raise TopologyError("namespace topologies need root (ip netns, tc, /dev/net/tun); "
                            "run as root or use topologies/loopback.yaml")
    if requested == "veth":
        return "veth", {"chosen": "veth", "reason": "requested: plain veth, no shaping"}
    assert ledger is not None
    probe: dict = {}
    if requested in ("auto", "netem"):
        probe["netem"] = probe_netem(ledger)
        if probe["netem"]["ok"]:
            return "netem", {**probe, "chosen": "netem", "reason": "netem qdisc works here"}
        if requested == "netem":
            raise TopologyError(f"backend netem refused: tc netem failed in a scratch "
                                f"namespace ({probe['netem']['error']}); the kernel lacks "
                                "sch_netem: use --backend userspace")
    probe["userspace"] = probe_userspace()
    if probe["userspace"]["ok"]:
        reason = ("requested" if requested == "userspace"
                  else f"netem unavailable ({probe['netem']['error']})")
        return "userspace", {**probe, "chosen": "userspace", "reason": reason}
    why = "; ".join(f"{name}: {result['error']}" for name, result in probe.items())
    raise TopologyError(f"no link backend works here: {why}")


def probe_here(topology: Topology, requested: str = "auto") -> tuple[str, dict]:
    """choose_backend's answer for topology on this machine without bringing it up: the
    probes run with a throwaway ledger, always removed (`topo up --dry-run`)."""
    if topology.loopback or os.geteuid() != 0:
        return choose_backend(requested, topology, None)  # answers or refuses unprobed
    ledger = Ledger.create(new_prefix(), topology.source_file, "probe")
    try:
        return choose_backend(requested, topology, ledger)
    finally:
        cleanup.remove_run(ledger)


# One shaped link between two namespaces: what every delayed, lossy or rate-limited
# topology asks of a backend.
SHAPED_LINK = Topology.model_validate({
    "name": "shaped-link-probe", "hosts": {"server": {"role": "server"},
                                           "client": {"role": "hot"}},
    "links": {"wan": {"a": "client", "b": "server", "delay_ms": 1}}})


def link_backend_here() -> tuple[str, dict]:
    """The backend that would emulate a shaped link here (netem, else userspace), with its
    probe record (`wanbench doctor`, the reproduction's capabilities); TopologyError naming
    why none would."""
    return probe_here(SHAPED_LINK)
