"""Which link backend works here: the table's probes tried in order (netem in a scratch
namespace, then the TUN emulator), or the one asked for, checked."""

from __future__ import annotations

import os

from harness.topology import cleanup
from harness.topology.addressing import new_prefix
from harness.topology.backends import AUTO, AUTO_ORDER, BACKENDS, CHOICES, LinkBackend
from harness.topology.ledger import Ledger
from harness.topology.model import Topology, TopologyError


def check_unshaped(topology: Topology, backend: LinkBackend) -> None:
    """A backend that cannot shape (plain veth, a fast baseline on any kernel) cannot delay,
    drop or rate-limit."""
    shaped = [n for n, lk in topology.links.items() if not lk.is_plain]
    if shaped:
        shapers = " or ".join(b.name for b in AUTO_ORDER)
        raise TopologyError(f"backend {backend.name} cannot shape; links {', '.join(shaped)} "
                            f"have delay, jitter, loss, rate or a queue limit: use {shapers}")


def choose_backend(requested: str, topology: Topology,
                   ledger: Ledger | None) -> tuple[str, dict]:
    """Returns (backend, probe record); TopologyError with the reasons when none fits."""
    if requested not in CHOICES:
        raise TopologyError(f"backend {requested!r}: choose one of {', '.join(CHOICES)}")
    loopback_only = next(b for b in BACKENDS.values() if not b.namespaces)
    if topology.loopback:
        if requested not in (AUTO, loopback_only.name):
            raise TopologyError(f"backend {requested!r}: a loopback topology has no links to "
                                f"emulate; use --backend {loopback_only.name} (or {AUTO})")
        return loopback_only.name, {"chosen": loopback_only.name,
                                    "reason": "loopback topology: no namespaces"}
    asked = BACKENDS.get(requested)
    if asked is not None and not asked.namespaces:
        raise TopologyError(f"backend {asked.name} is only for loopback topologies; use "
                            f"{AUTO}, " + " or ".join(b.name for b in AUTO_ORDER))
    if asked is not None and not asked.shapes:
        check_unshaped(topology, asked)
    if os.geteuid() != 0:
        raise TopologyError("namespace topologies need root (ip netns, tc, /dev/net/tun); "
                            "run as root or use topologies/loopback.yaml")
    if asked is not None and asked.probe is None:
        return asked.name, {"chosen": asked.name, "reason": "requested: plain veth, no shaping"}
    chosen, probe = first_working((asked,) if asked is not None else AUTO_ORDER, ledger)
    if chosen is not None:
        tried = [f"{name} unavailable ({probe[name]['error']})" for name in probe
                 if name != chosen]
        reason = "requested" if asked is not None else "; ".join(tried) or f"{chosen} works here"
        return chosen, {**probe, "chosen": chosen, "reason": reason}
    if asked is not None:
        raise TopologyError(f"backend {asked.name} refused: {probe[asked.name]['error']}"
                            + (f"; {asked.lacking}" if asked.lacking else ""))
    why = "; ".join(f"{name}: {result['error']}" for name, result in probe.items())
    raise TopologyError(f"no link backend works here: {why}")


def first_working(backends: tuple[LinkBackend, ...],
                  ledger: Ledger | None) -> tuple[str | None, dict]:
    """The first of backends whose probe works (None if none does), and the probe record of
    each one tried, by name."""
    probe: dict = {}
    for backend in backends:
        assert backend.probe is not None
        probe[backend.name] = result = backend.probe(ledger)
        if result["ok"]:
            return backend.name, probe
    return None, probe


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


def emulator_backend_here() -> tuple[str, dict]:
    """The path the userspace emulator takes here, as a shaped link without netem gets it: the
    first backend of AUTO_ORDER that runs it (AF_XDP, then TUN devices) whose probe works,
    with the probe record of each one tried (`wanbench doctor`); TopologyError naming why
    none would. The probes run with a throwaway ledger, always removed."""
    if os.geteuid() != 0:
        raise TopologyError("the emulator's probes need root (namespaces, AF_XDP, TUN)")
    emulators = tuple(b for b in AUTO_ORDER if b.binary is not None)
    ledger = Ledger.create(new_prefix(), None, "probe")
    try:
        chosen, probe = first_working(emulators, ledger)
    finally:
        cleanup.remove_run(ledger)
    if chosen is None:
        raise TopologyError("; ".join(f"{name}: {r['error']}" for name, r in probe.items()))
    return chosen, probe
