"""Machine and software metadata recorded with every run (cf. pyperf's _collect_metadata)."""

from __future__ import annotations

import gzip
import hashlib
import os
import platform
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import harness
from clients.paths import REPO_ROOT
from harness.metrics import noise

SYSCTLS = (
    "net.core.somaxconn",
    "net.core.netdev_max_backlog",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_max_syn_backlog",
    "net.ipv4.tcp_tw_reuse",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "fs.file-max",
    "fs.nr_open",
    "kernel.perf_event_paranoid",
    "kernel.kptr_restrict",
    "kernel.io_uring_disabled",
)

# tool -> argv printing its version; the first non-empty output line is kept.
TOOL_VERSION_ARGV = {
    "wrk": ["wrk", "--version"],
    "wrk2": ["wrk2", "--version"],
    "httperf": ["httperf", "--version"],
    "nginx": ["nginx", "-v"],
    "perf": ["perf", "--version"],
    "cc": ["cc", "--version"],
    "ip": ["ip", "-V"],
}


def read_text(path: str | Path) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def sysctl(name: str) -> str | None:
    value = read_text("/proc/sys/" + name.replace(".", "/"))
    return " ".join(value.split()) if value is not None else None


def kernel_info() -> dict[str, Any]:
    release = platform.release()
    config: bytes | None = None
    try:
        config = gzip.decompress(Path("/proc/config.gz").read_bytes())
    except OSError:
        try:
            config = Path(f"/boot/config-{release}").read_bytes()
        except OSError:
            config = None
    version = read_text("/proc/version")
    return {
        "release": release,
        "version": version.strip() if version else None,
        "config_sha256": hashlib.sha256(config).hexdigest() if config else None,
    }


def tsc_hz() -> tuple[float | None, str]:
    """TSC frequency and where it came from; kernel calibration beats cpuinfo's MHz."""
    try:
        dmesg = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.TimeoutExpired):
        dmesg = ""
    for pattern in (r"tsc: Refined TSC clocksource calibration: ([\d.]+) MHz",
                    r"tsc: Detected ([\d.]+) MHz processor"):
        match = re.search(pattern, dmesg)
        if match:
            return float(match.group(1)) * 1e6, "dmesg: " + match.group(0)
    khz = read_text("/sys/devices/system/cpu/cpu0/tsc_freq_khz")
    if khz:
        return float(khz) * 1e3, "/sys/devices/system/cpu/cpu0/tsc_freq_khz"
    match = re.search(r"cpu MHz\s*:\s*([\d.]+)", read_text("/proc/cpuinfo") or "")
    if match:
        return float(match.group(1)) * 1e6, "/proc/cpuinfo cpu MHz (current frequency)"
    return None, "unknown"


CACHES = Path("/sys/devices/system/cpu/cpu0/cache")
CACHE_SIZE = re.compile(r"(\d+)([KMG]?)")


def last_level_cache_bytes(caches: Path = CACHES) -> int | None:
    """The size of CPU 0's highest-level cache (a VM's is what its hypervisor reports);
    None where sysfs has none."""
    sizes = {}
    for index in caches.glob("index*"):
        level, size = read_text(index / "level"), read_text(index / "size")
        match = CACHE_SIZE.fullmatch(size.strip()) if size else None
        if level and match:
            scale = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[match.group(2)]
            sizes[int(level)] = max(sizes.get(int(level), 0), int(match.group(1)) * scale)
    return sizes[max(sizes)] if sizes else None


def cpu_info() -> dict[str, Any]:
    cpuinfo = read_text("/proc/cpuinfo") or ""
    model = re.search(r"model name\s*:\s*(.+)", cpuinfo)
    hz, source = tsc_hz()
    governor = read_text("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    return {
        "model": model.group(1).strip() if model else platform.processor() or None,
        "count": os.cpu_count(),
        "tsc_hz": hz,
        "tsc_hz_source": source,
        "governor": governor.strip() if governor else None,
        "last_level_cache_bytes": last_level_cache_bytes(),
    }


def tool_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for tool, argv in TOOL_VERSION_ARGV.items():
        if shutil.which(argv[0]) is None:
            versions[tool] = None
            continue
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            versions[tool] = None
            continue
        lines = [ln.strip() for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
        versions[tool] = lines[0] if lines else None
    return versions


# What runs and reproductions write, not the code that measures: changed, the revision is
# still clean (`make beyond` after `make reproduce`, which rewrote both, is from the same one).
OUTPUTS = ("results", "REPRODUCTION.md")


def git_revision() -> str | None:
    """HEAD's commit, with `-dirty` when a tracked file other than OUTPUTS differs from it."""
    try:
        rev = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"],
                             capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain",
                                "--untracked-files=no", "--", ".",
                                *(f":(exclude){path}" for path in OUTPUTS)],
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if rev.returncode != 0:
        return None
    return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def collect() -> dict[str, Any]:
    """Everything about this machine that a later comparison needs to trust a result."""
    return {
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "kernel": kernel_info(),
        "sysctls": {name: sysctl(name) for name in SYSCTLS},
        "cpu": cpu_info(),
        "tools": tool_versions(),
        "wanbench_version": harness.__version__,
        "git_revision": git_revision(),
        "hostname": platform.node(),
        # Other work on the machine skews results: say how busy it was when the run began.
        "loadavg_at_start": list(os.getloadavg()),
        "noise_sources": noise.manifest_entry(),
    }
