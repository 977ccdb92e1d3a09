"""perf stat hardware counters on the server's CPU, or cycles estimated from CPU time."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

COUNTERS = ("cycles", "instructions", "cache-misses")


def hardware_counters() -> tuple[bool, str]:
    """Whether `perf stat` can count cycles here, and the reason when it cannot."""
    if shutil.which("perf") is None:
        return False, "perf is not installed (fix: apt-get install linux-perf)"
    try:
        done = subprocess.run(["perf", "stat", "-x,", "-e", "cycles", "true"],
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"perf stat failed: {exc}"
    values = parse_stat(done.stderr)
    if values.get("cycles") is None:
        line = next((ln for ln in done.stderr.splitlines() if "cycles" in ln), "")
        said = line.split(",")[0] if line else done.stderr.strip()[:200] or "no output"
        return False, f"perf stat -e cycles says {said}: no hardware counters here"
    return True, "perf stat -e cycles works"


def parse_stat(text: str) -> dict[str, float | None]:
    """Parse `perf stat -x,` output: value,unit,event,... ; '<not supported>' becomes None."""
    values: dict[str, float | None] = {}
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) < 3 or not fields[2]:
            continue
        event = fields[2].split(":")[0]
        try:
            values[event] = float(fields[0])
        except ValueError:
            values[event] = None
    return values


def stat_argv(cpu: int, output: Path) -> list[str]:
    """perf stat over everything that runs on the server's CPU (softirq work included)."""
    return ["perf", "stat", "-x,", "-o", str(output), "-e", ",".join(COUNTERS), "-C", str(cpu)]


def counters_from_file(output: Path) -> dict[str, float | None]:
    values = parse_stat(output.read_text()) if output.is_file() else {}
    return {
        "cycles": values.get("cycles"),
        "instructions": values.get("instructions"),
        "cache_misses": values.get("cache-misses"),
    }


def estimated_cycles(busy_s: float, tsc_hz: float | None) -> float | None:
    """Cycles the CPU was busy for, from its busy time and the TSC frequency (an estimate)."""
    return busy_s * tsc_hz if tsc_hz else None
