"""What a claim may need that a machine or a kernel can lack, and why it is missing here."""

from __future__ import annotations

import os
from collections.abc import Callable

from harness.analysis.paper_values import ABSENT_FROM_LINUX
from harness.metrics import ktrace, perf
from harness.results.format import topology_backend
from harness.results.runset import RunSet
from harness.topology.backend_probe import link_backend_here
from harness.topology.backends import BACKENDS
from harness.topology.model import TopologyError


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


# Server, generator and a userspace link emulator each need a CPU of their own once the
# emulator forwards tens of thousands of packets a second: sharing the generator's, it
# starves it (87 % of a CPU for 1024 connections of 8 KB replies at 40 ms, cpp Fig. 3).
CPUS_BESIDE_EMULATOR = 3


def _emulated_link_at_load(runs: RunSet | None) -> str | None:
    """A delayed link that carries a saturating load: netem (in the kernel, on the CPU
    that sends) or a CPU for the userspace emulator beside the server's and the
    generator's. From the run's manifests (what it had), else from this machine."""
    if runs is not None and runs.raw_manifests:
        setups = {(topology_backend(m), (m.get("cpu") or {}).get("count"))
                  for m in runs.raw_manifests.values()}
    else:
        try:
            setups = {(link_backend_here()[0], os.cpu_count())}
        except TopologyError as exc:
            return f"an emulated link (this machine could not be probed: {exc})"
    lacking = sorted(f"{count} CPUs" for backend, count in setups
                     if _runs_emulator(backend) and (count or 0) < CPUS_BESIDE_EMULATOR)
    if not lacking:
        return None
    return (f"sch_netem, or {CPUS_BESIDE_EMULATOR} CPUs for the userspace link emulator (the "
            f"run had {', '.join(lacking)}: the emulator shared the generator's CPU and "
            "starved it)")


def _runs_emulator(backend: str | None) -> bool:
    """The backend runs a link emulator in userspace, on the measured hosts' CPUs."""
    chosen = BACKENDS.get(backend or "")
    return chosen is not None and chosen.binary is not None


def _traced(runs: RunSet | None) -> list[ktrace.Support]:
    """What wb-ktrace could do where runs were made (each manifest's kernel_trace, recorded
    when the scenario asked to trace), else on this machine."""
    if runs is not None and runs.raw_manifests:
        return ktrace.recorded(runs.raw_manifests.values())
    return [ktrace.support()]


def _kernel_trace(runs: RunSet | None) -> str | None:
    """The kernel_* columns (wb-ktrace's tracepoints). A run that did not ask for them lacks
    nothing: its claims find no columns and say so."""
    lacking = sorted({s.detail for s in _traced(runs) if not s.tracepoints})
    return f"eBPF tracing of the kernel ({'; '.join(lacking)})" if lacking else None


def _function_grain(runs: RunSet | None) -> str | None:
    """In-kernel time of one kernel function (fentry), not only of a system call or softirq."""
    lacking = sorted({s.detail for s in _traced(runs) if not s.fentry})
    return (f"in-kernel time per kernel function: fentry programs ({'; '.join(lacking)})"
            if lacking else None)


# Kernel code the papers measured that no kernel here has: a claim about it cannot be tested
ABSENT_FROM_TODAYS_KERNELS = {
    "linear_ufalloc": "the 1998 kernels' linear search for the lowest free descriptor: Linux "
                      "finds it in a two-level bitmap (fs/file.c, alloc_fd: find_next_fd over "
                      "full_fds_bits and open_fds), like the paper's new ufalloc",
}

PROBES: dict[str, Callable[[RunSet | None], str | None]] = {
    "hardware_counters": _hardware_counters,
    "emulated_link_at_load": _emulated_link_at_load,
    "kernel_trace": _kernel_trace,
    "function_grain": _function_grain,
    **{name: (lambda runs, why=why: why) for name, why in
       {**ABSENT_FROM_LINUX, **ABSENT_FROM_TODAYS_KERNELS}.items()},
}


def missing(capability: str | None, runs: RunSet | None) -> str | None:
    """Why `capability` is unavailable to runs (or, with none, to this machine); None when
    it is available or nothing is needed."""
    return PROBES[capability](runs) if capability else None
