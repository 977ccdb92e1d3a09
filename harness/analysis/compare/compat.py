"""May two runs be compared? What differs between them, and is it allowed to?

A comparison attributes a change to the kernel (and whatever else the machine's run-to-run
state is). So the *experiment* must be the same: the scenario outside its sweep axes
(rate, duration, warm-up, topology, generator ...), the topology backend actually used,
the tool versions, the CPU model and count. Those differences are refused (exit 2) unless
--force, which keeps them as loud warnings. Differences on the kernel's side (release,
build, configuration, command line, sysctls) and in the machine's state (governor, isolated
CPUs, interrupt affinity, hostname, wanbench's own revision) are allowed and listed in the
report's header, so a reader knows what the verdict is about.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.metrics.noise import READINGS
from harness.results.format import topology_backend

# Scenario fields that may differ: they change how many samples there are, the order and
# lifetime of what measures them (a server held across hot loads: each point's
# server_carried_over says), or what is checked after the run (thresholds), not what is
# measured.
FREE_SCENARIO_FIELDS = ("description", "repetitions", "order", "order_seed",
                        "interference_retries", "quiet_wait_s", "hold_server_across_hot",
                        "thresholds")
# perf is versioned with the kernel (linux-perf / tools/perf), so it follows the kernel.
KERNEL_SIDE_TOOLS = ("perf",)
TSC_TOLERANCE = 0.005
# The manifest's keys these checks read (a noise record keeps them of the runs it measured).
MANIFEST_KEYS = ("scenario", "topology", "cpu", "tools", "perf", "kernel", "sysctls",
                 "noise_sources", "git_revision", "hostname")


@dataclass
class Differences:
    refused: list[str] = field(default_factory=list)  # the experiment differs
    listed: list[str] = field(default_factory=list)  # kernel and machine state

    def extend(self, other: Differences) -> None:
        self.refused += other.refused
        self.listed += other.listed


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}{key}."))
        return out or {prefix.rstrip("."): {}}
    return {prefix.rstrip("."): value}


def _under(path: str, roots: set[str]) -> bool:
    return any(path == root or path.startswith(root + ".") for root in roots)


def _show(value: Any) -> str:
    text = "unset" if value is None else str(value)
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


def _changed(name: str, a: Any, b: Any) -> str:
    return f"{name}: {_show(a)} -> {_show(b)}"


def scenario_differences(base: dict, cand: dict) -> Differences:
    """Scenario fields outside the sweep axes that differ (sweep values may differ)."""
    out = Differences()
    axes_b, axes_c = set(base.get("sweep") or {}), set(cand.get("sweep") or {})
    if axes_b != axes_c:
        out.refused.append(_changed("scenario sweep axes", sorted(axes_b), sorted(axes_c)))
    skip = axes_b | axes_c | {"sweep", "name", *FREE_SCENARIO_FIELDS}
    flat_b, flat_c = _flatten(base), _flatten(cand)
    for key in sorted(flat_b.keys() | flat_c.keys()):
        if _under(key, skip):
            continue
        if flat_b.get(key) != flat_c.get(key):
            out.refused.append(_changed(f"scenario {key}", flat_b.get(key), flat_c.get(key)))
    for key in FREE_SCENARIO_FIELDS[1:]:
        if base.get(key) != cand.get(key):
            out.listed.append(_changed(f"scenario {key}", base.get(key), cand.get(key)))
    return out


def kernel_differences(base: dict, cand: dict) -> list[str]:
    """How the kernel builds of two manifests differ (release, version, configuration)."""
    kb, kc = base.get("kernel") or {}, cand.get("kernel") or {}
    return [_changed(f"kernel {key}", kb.get(key), kc.get(key))
            for key in ("release", "version", "config_sha256") if kb.get(key) != kc.get(key)]


def _kernel(base: dict, cand: dict) -> list[str]:
    out = kernel_differences(base, cand)
    sb, sc = base.get("sysctls") or {}, cand.get("sysctls") or {}
    out += [_changed(f"sysctl {key}", sb.get(key), sc.get(key))
            for key in sorted(sb.keys() | sc.keys()) if sb.get(key) != sc.get(key)]
    nb, nc = base.get("noise_sources") or {}, cand.get("noise_sources") or {}
    for key in sorted(nb.keys() | nc.keys()):
        if key in READINGS:
            continue  # a reading, not the machine's configuration
        vb, vc = (nb.get(key) or {}).get("value"), (nc.get(key) or {}).get("value")
        if vb != vc:
            name = "cmdline" if key == "kernel command line" else key
            out.append(_changed(name, vb, vc))
    return out


def _cpu(base: dict, cand: dict) -> Differences:
    out = Differences()
    cb, cc = base.get("cpu") or {}, cand.get("cpu") or {}
    for key in ("model", "count"):
        if cb.get(key) != cc.get(key):
            out.refused.append(_changed(f"CPU {key}", cb.get(key), cc.get(key)))
    if cb.get("governor") != cc.get("governor"):
        out.listed.append(_changed("CPU governor", cb.get("governor"), cc.get("governor")))
    tb, tc = cb.get("tsc_hz"), cc.get("tsc_hz")
    if tb and tc and abs(tc / tb - 1) > TSC_TOLERANCE:
        out.listed.append(_changed("CPU TSC Hz", tb, tc))
    return out


def _tools(base: dict, cand: dict) -> Differences:
    out = Differences()
    tb, tc = base.get("tools") or {}, cand.get("tools") or {}
    for key in sorted(tb.keys() | tc.keys()):
        if tb.get(key) != tc.get(key):
            target = out.listed if key in KERNEL_SIDE_TOOLS else out.refused
            target.append(_changed(f"tool {key}", tb.get(key), tc.get(key)))
    return out


def differences(base: dict, cand: dict) -> Differences:
    """Everything that differs between two manifests, sorted into refused and listed."""
    out = scenario_differences(base.get("scenario") or {}, cand.get("scenario") or {})
    backend_b, backend_c = topology_backend(base), topology_backend(cand)
    if backend_b != backend_c:
        out.refused.append(_changed("topology backend", backend_b, backend_c))
    out.extend(_cpu(base, cand))
    out.extend(_tools(base, cand))
    counters_b = (base.get("perf") or {}).get("hardware_counters")
    counters_c = (cand.get("perf") or {}).get("hardware_counters")
    if counters_b != counters_c:
        out.listed.append(_changed("hardware counters", counters_b, counters_c))
    out.listed = _kernel(base, cand) + out.listed
    if base.get("git_revision") != cand.get("git_revision"):
        out.listed.append(_changed("wanbench revision", base.get("git_revision"),
                                   cand.get("git_revision")))
    if base.get("hostname") != cand.get("hostname"):
        out.listed.append(_changed("hostname", base.get("hostname"), cand.get("hostname")))
    return out
