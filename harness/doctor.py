"""What this machine can measure, and the fix for what it cannot (`wanbench doctor` shows it)."""

from __future__ import annotations

import ctypes
import os
import resource
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from clients.drivers.common import INSTALL_FIX
from clients.paths import BIN_DIR
from harness.guest import accel, machine
from harness.manifest import read_text, sysctl
from harness.metrics import ktrace, perf, whoran
from harness.topology.backend_probe import emulator_backend_here, link_backend_here
from harness.topology.backends import NETEM, XDP
from harness.topology.model import TopologyError

SYS_IO_URING_SETUP = 425


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    essential: bool = False
    shortfall: str = "missing"  # what a failed check is called: "missing" or "low"


def _tool(name: str, fix: str) -> Check:
    path = shutil.which(name)
    return Check(name, path is not None, path or "not on PATH", "" if path else fix)


def check_namespaces() -> Check:
    if os.geteuid() != 0:
        return Check("network namespaces", False, "not root", "run as root (or sudo)", True)
    name = f"wbdoctor{os.getpid()}"
    added = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if added.returncode != 0:
        return Check("network namespaces", False, added.stderr.strip(),
                     "a kernel with CONFIG_NET_NS and iproute2 (apt-get install iproute2)", True)
    subprocess.run(["ip", "netns", "delete", name], capture_output=True)
    return Check("network namespaces", True, "ip netns add/delete works")


def check_netem() -> Check:
    """netem as the runner would find it: the probe that chooses a shaped link's backend."""
    try:
        _, probe = link_backend_here()
    except TopologyError as exc:
        return Check("netem (sch_netem)", False, f"not probed: {exc}", "run as root")
    result = probe.get(NETEM.name) or {"ok": False, "error": "not probed"}
    ok = result["ok"]
    detail = "tc qdisc netem works" if ok else f"tc netem: {result['error']}"
    no_modules = modules_unavailable()
    if ok:
        fix = ""
    elif no_modules:
        fix = (f"{no_modules}, so sch_netem cannot be loaded: netem needs another kernel (one "
               f"built with CONFIG_NET_SCH_NETEM=y, or booted with its modules); wanbench "
               f"falls back to wb-linkem, the userspace emulator")
    else:
        fix = ("modprobe sch_netem (Debian's linux-image packages ship it as a module); "
               "meanwhile wanbench falls back to wb-linkem, the userspace emulator")
    return Check("netem (sch_netem)", ok, detail, fix)


def modules_unavailable(cmdline: Path = Path("/proc/cmdline"),
                        modules: Path = Path("/lib/modules")) -> str | None:
    """Why this kernel can load no module (booted with `nomodule`, or none installed for
    it), or None."""
    if "nomodule" in (read_text(cmdline) or "").split():
        return "the kernel was booted with nomodule"
    release = os.uname().release
    if not (modules / release).is_dir():
        return f"there is no {modules / release} (no modules for this kernel)"
    return None


def check_userspace_emulator() -> Check:
    """Which path wb-linkem takes here, as a run's probe finds it: AF_XDP between the far ends
    of veth pairs, else TUN devices (a read and a write per packet), else neither and why."""
    name = "userspace link emulator"
    try:
        chosen, record = emulator_backend_here()
    except TopologyError as exc:
        return Check(name, False, f"neither path works: {exc}",
                     "run as root; make (wb-linkem); modprobe tun (CONFIG_TUN), or a kernel "
                     "with CONFIG_XDP_SOCKETS for the AF_XDP path")
    if chosen == XDP.name:
        return Check(name, True, "AF_XDP path (--backend xdp): wb-linkem forwards between the "
                     "far ends of veth pairs, an XDP program redirecting their frames to its "
                     "AF_XDP sockets; no system call per packet received, one per batch sent")
    why = record.get(XDP.name, {}).get("error", "not probed")
    return Check(name, False, f"TUN path (--backend {chosen}), a read and a write per packet: "
                 f"AF_XDP unavailable ({why})",
                 "a kernel with CONFIG_XDP_SOCKETS and XDP on veth, and CAP_NET_RAW, CAP_BPF "
                 "and CAP_NET_ADMIN for wb-linkem, for the AF_XDP path", shortfall="TUN only")


def check_guests() -> Check:
    """Whether `wanbench run --kernel IMAGE` can boot guests, and how their CPU runs."""
    name = "kernels in guests (--kernel)"
    try:
        machine.vng()
    except machine.GuestError as exc:
        return Check(name, False, str(exc), machine.SETUP_FIX)
    if shutil.which(accel.QEMU) is None:
        return Check(name, False, f"{accel.QEMU} not installed", machine.SETUP_FIX)
    images = sorted(Path("/boot").glob("vmlinuz-*"), key=lambda p: p.stat().st_mtime)
    if not images:
        return Check(name, False, "no kernel image in /boot to probe with",
                     "install a kernel package, e.g. linux-image-amd64 (Debian)")
    mode = accel.probe(images[-1])
    if not mode.emulated:
        return Check(name, True, f"KVM: {mode.why}")
    return Check(name, False, f"TCG only: {mode.why}; a guest's points are then all invalid "
                 "for performance (emulated CPU: timings not comparable), its functional "
                 "results kept", "a host where KVM works (bare metal, or a VM with nested "
                 "virtualisation) for comparable timings", shortfall="TCG only")


def check_counters() -> Check:
    ok, reason = perf.hardware_counters()
    return Check("perf hardware counters", ok, reason, "" if ok else
                 "a host or VM with PMU access (e.g. KVM -cpu host); meanwhile cycles are "
                 "estimated from CPU time × TSC frequency and labelled so")


def check_perf_record() -> Check:
    if shutil.which("perf") is None:
        return Check("perf record + kallsyms", False, "perf not installed",
                     "apt-get install linux-perf")
    try:
        first = Path("/proc/kallsyms").read_text().split("\n", 1)[0]
    except OSError as exc:
        return Check("perf record + kallsyms", False, str(exc), "mount /proc")
    if first.startswith("0000000000000000"):
        return Check("perf record + kallsyms", False, "kernel addresses hidden",
                     "sysctl kernel.kptr_restrict=0 (as root)")
    paranoid = sysctl("kernel.perf_event_paranoid")
    if os.geteuid() != 0 and paranoid is not None and int(paranoid) > 0:
        return Check("perf record + kallsyms", False, f"perf_event_paranoid={paranoid}",
                     "run as root or sysctl kernel.perf_event_paranoid=-1")
    return Check("perf record + kallsyms", True, "cpu-clock sampling with kernel symbols")


def check_kernel_trace() -> Check:
    """What `kernel_trace: true` can use here (wb-ktrace): tracepoints (the kernel_* columns),
    fentry (function grain), or neither, and why."""
    name = "kernel tracing (eBPF, wb-ktrace)"
    allowed = ktrace.support()
    if not allowed.tracepoints:
        problem, _, fix = allowed.detail.partition("; fix: ")
        return Check(name, False, f"neither tracepoints nor fentry: {problem}; the kernel_* "
                     "columns are null", fix)
    if allowed.fentry:
        return Check(name, True, f"tracepoints and fentry (kernel_trace: true works): "
                     f"{allowed.function_grain()}")
    return Check(name, True, f"tracepoints only (kernel_trace: true works, at the grain of "
                 f"system calls and softirqs): {allowed.detail.partition('; ')[2]}",
                 "function grain would need fentry: a kernel that does not lock function "
                 "tracing (bare metal and KVM guests usually allow it)")


def check_who_ran() -> Check:
    """Whether who ran on the generator's and the server's CPUs is traced here (wb-whoran), and
    the fallback where it is not."""
    name = "who-ran tracing (eBPF, wb-whoran)"
    why = whoran.cannot_run()
    if why is None:
        return Check(name, True, "tracepoints work: other tasks' time on the measured CPUs and "
                     "the waits behind them are traced")
    problem, _, fix = why.partition("; fix: ")
    return Check(name, False, f"{problem}; other tasks' time on the measured CPUs falls back to "
                 "a lower bound from /proc/stat, and the waits behind them are null", fix)


def check_nofile() -> Check:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ok = hard >= 65536
    return Check("RLIMIT_NOFILE", ok, f"soft {soft}, hard {hard}",
                 "" if ok else "connections past the hard limit are sharded over processes "
                 "automatically; to raise it: ulimit -Hn / limits.conf / systemd LimitNOFILE",
                 shortfall="low")


def check_sigpending() -> Check:
    soft, hard = resource.getrlimit(resource.RLIMIT_SIGPENDING)
    ok = soft >= 1024
    return Check("RLIMIT_SIGPENDING", ok, f"soft {soft}, hard {hard} (the RT-signal queue)",
                 "" if ok else "ulimit -i 65536 to measure rtsig before overflow", shortfall="low")


def check_io_uring() -> Check:
    if sysctl("kernel.io_uring_disabled") not in (None, "0"):
        return Check("io_uring", False, "kernel.io_uring_disabled is set",
                     "sysctl kernel.io_uring_disabled=0")
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)
    fd = libc.syscall(SYS_IO_URING_SETUP, 4, params)
    if fd < 0:
        return Check("io_uring", False, os.strerror(ctypes.get_errno()),
                     "a kernel ≥ 5.19 with CONFIG_IO_URING (multishot accept)")
    os.close(fd)
    return Check("io_uring", True, "io_uring_setup works")


def check_somaxconn() -> Check:
    value = int(sysctl("net.core.somaxconn") or 0)
    ok = value >= 4096
    return Check("net.core.somaxconn", ok, str(value),
                 "" if ok else "sysctl net.core.somaxconn=65535 (bursts of cold connects)",
                 shortfall="low")


def check_port_range() -> Check:
    low, high = (int(v) for v in (sysctl("net.ipv4.ip_local_port_range") or "0 0").split())
    ok = high - low >= 28000
    return Check("ephemeral port range", ok, f"{low}-{high} ({high - low + 1} ports per source "
                 "address; wb-sclient spreads cold connections over many source addresses)",
                 "" if ok else 'sysctl net.ipv4.ip_local_port_range="1024 65535"', shortfall="low")


def check_binaries() -> Check:
    names = ("wb-server", "wb-sclient", "wb-linkem")
    missing = [n for n in names if not (BIN_DIR / n).is_file()]
    return Check("wanbench binaries", not missing,
                 f"missing: {', '.join(missing)}" if missing else f"in {BIN_DIR}",
                 "make" if missing else "", True)


CHECKS: tuple[Callable[[], Check], ...] = (
    check_binaries, check_namespaces, check_netem, check_userspace_emulator, check_guests,
    check_counters,
    check_perf_record,
    check_kernel_trace,
    check_who_ran,
    *(lambda tool=tool: _tool(tool, INSTALL_FIX[tool]) for tool in INSTALL_FIX),
    check_nofile, check_sigpending, check_io_uring, check_somaxconn, check_port_range,
)


def run_checks() -> list[Check]:
    return [check() for check in CHECKS]
