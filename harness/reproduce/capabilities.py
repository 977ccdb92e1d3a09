"""What a claim may need that a machine or a kernel can lack, and why it is missing here."""

from __future__ import annotations

from collections.abc import Callable

from harness.metrics import perf
from harness.results.runset import RunSet

# Mechanisms the papers measured that no Linux kernel has: a claim about them is never
# testable here, whatever the machine.
ABSENT_FROM_LINUX = {
    "dev_poll": "/dev/poll (Solaris; its Linux 2.4 port was never merged): wanbench's devpoll "
                "backend is an epoll-backed stand-in whose cost does not grow with connections",
    "signal_per_fd": "signal-per-fd (Chandra & Mosberger's Linux 2.4 patch, never merged; "
                     "F_SETSIG still queues one signal per event)",
}


def _hardware_counters(runs: RunSet | None) -> str | None:
    """From the run's manifest when there is one (what it had), else from this machine."""
    if runs is not None and not runs.manifests.empty:
        if runs.manifests["hardware_counters"].fillna(False).astype(bool).all():
            return None
        reasons = {(m.get("perf") or {}).get("reason") or "none recorded"
                   for m in runs.raw_manifests.values()}
        return "hardware counters (the run had none: " + "; ".join(sorted(reasons)) + ")"
    available, reason = perf.hardware_counters()
    return None if available else f"hardware counters ({reason})"


PROBES: dict[str, Callable[[RunSet | None], str | None]] = {
    "hardware_counters": _hardware_counters,
    **{name: (lambda runs, why=why: why) for name, why in ABSENT_FROM_LINUX.items()},
}


def missing(capability: str | None, runs: RunSet | None) -> str | None:
    """Why `capability` is unavailable to runs (or, with none, to this machine); None when
    it is available or nothing is needed."""
    return PROBES[capability](runs) if capability else None
