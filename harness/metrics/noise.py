"""What on this machine makes measurements noisy, as pyperf's `system show` reports it: steal
(right now for `wanbench doctor`, since boot for a run's manifest), isolated CPUs, frequency
governor and boost, where network interrupts land, the kernel command line, guest idle
polling. Read-only: it suggests, it changes nothing."""

from __future__ import annotations

import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.metrics import cpu

SYS_CPU = Path("/sys/devices/system/cpu")
NET_IRQ = re.compile(r"virtio\d+-(input|output)|eth|ens|enp|mlx|ixgbe|i40e|ena|gve")
STEAL_NOW, STEAL_SINCE_BOOT, LOAD_AVERAGE = ("CPU steal now", "CPU steal since boot",
                                             "load average")
# sources whose value is a reading that moves by itself, not the machine's configuration
READINGS = (STEAL_NOW, STEAL_SINCE_BOOT, LOAD_AVERAGE)


@dataclass(frozen=True)
class Source:
    name: str
    value: str
    suggestion: str = ""  # empty: nothing to do


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def steal_pct(after: dict[int, cpu.CpuTimes],
              before: dict[int, cpu.CpuTimes] | None = None) -> float | None:
    """% of all CPUs' time the hypervisor took between two reads of /proc/stat (since boot
    without the first)."""
    def taken(times: dict[int, cpu.CpuTimes] | None, n: int) -> tuple[float, float]:
        return (times[n].seconds["steal"], times[n].total_s) if times else (0.0, 0.0)

    stolen = sum(taken(after, n)[0] - taken(before, n)[0] for n in after)
    total = sum(taken(after, n)[1] - taken(before, n)[1] for n in after)
    return 100 * stolen / total if total > 0 else None


def steal_now(sample_s: float = 0.5) -> float | None:
    """% of all CPUs' time the hypervisor took over a short sample."""
    before = cpu.all_cpu_times()
    time.sleep(sample_s)
    return steal_pct(cpu.all_cpu_times(), before)


def net_irq_affinity() -> dict[str, str]:
    """Network interrupt name → the CPUs it may land on."""
    found = {}
    for line in (_read(Path("/proc/interrupts")) or "").splitlines()[1:]:
        number, _, rest = line.partition(":")
        name = rest.split()[-1] if rest.split() else ""
        if number.strip().isdigit() and NET_IRQ.search(name):
            found[name] = _read(Path(f"/proc/irq/{number.strip()}/smp_affinity_list")) or "?"
    return found


def sources(steal_sample_s: float | None = 0.5) -> list[Source]:
    """steal_sample_s: how long to sample steal for; None: its share since boot, read at once
    (a run measures steal in every window: its start need not wait for a sample)."""
    steal = (steal_now(steal_sample_s) if steal_sample_s is not None
             else steal_pct(cpu.all_cpu_times()))
    isolated = _read(SYS_CPU / "isolated") or ""
    governors = {g for n in range(os.cpu_count() or 1)
                 if (g := _read(SYS_CPU / f"cpu{n}/cpufreq/scaling_governor"))}
    boost = _read(SYS_CPU / "cpufreq/boost") or _read(SYS_CPU / "intel_pstate/no_turbo")
    halt_poll = _read(Path("/sys/module/haltpoll/parameters/guest_halt_poll_ns"))
    irqs = net_irq_affinity()
    cmdline = _read(Path("/proc/cmdline")) or ""
    load = os.getloadavg()
    return [
        Source(STEAL_NOW if steal_sample_s is not None else STEAL_SINCE_BOOT,
               "unreadable" if steal is None else f"{steal:.1f} %",
               "" if not steal or steal < 1 else "neighbours take CPU time: measure ratios side "
               "by side in one run, repeat, and read each point's steal_*_cpu_pct"),
        Source(LOAD_AVERAGE, f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
               "" if load[0] < 0.5 else "other work is running: wait for it, or stop it"),
        Source("isolated CPUs", isolated or "none",
               "" if isolated else "isolcpus=/nohz_full= on the kernel command line keeps other "
               "tasks off the server's and generator's CPUs"),
        Source("frequency governor", ", ".join(sorted(governors)) or "no cpufreq (fixed or "
               "host-controlled clock)",
               "cpupower frequency-set -g performance" if governors - {"performance"} else ""),
        Source("turbo/boost", boost if boost is not None else "not exposed",
               "disable boost (echo 0 > /sys/devices/system/cpu/cpufreq/boost) so the clock "
               "does not follow temperature" if boost == "1" else ""),
        Source("network IRQ affinity", ", ".join(f"{k}→{v}" for k, v in irqs.items()) or
               "no network interrupts found (virtual or loopback-only)",
               "pin network interrupts away from the server's CPU (/proc/irq/N/smp_affinity_list)"
               if irqs and any(v in ("0", "0-1") or "," in v or "-" in v
                               for v in irqs.values()) else ""),
        Source("guest idle polling", f"guest_halt_poll_ns={halt_poll}" if halt_poll is not None
               else "not a haltpoll guest",
               "idle vCPUs wake slowly (halt polling off): wake-up latency dominates at low "
               "rates" if halt_poll == "0" else ""),
        Source("kernel command line", cmdline),
    ]


def manifest_entry() -> dict[str, Any]:
    return {s.name: asdict(s) for s in sources(steal_sample_s=None)}
