"""One guest: a kernel image booted with virtme-ng (the host's file system read-only, the
given directories writable) runs one command and powers off; nothing is left running."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.guest import inside
from harness.guest.accel import QEMU, Accel
from harness.guest.console import Console
from harness.guest.record import GuestRecord
from harness.scenario import Guest

SETUP_FIX = "make system-deps (qemu-system-x86, busybox-static) and make python-deps (virtme-ng)"
# The kernel's console level: errors and worse (an oops, a panic, the OOM killer's kills) reach
# the console and so a failure's message. Without --verbose virtme-ng sends the kernel's
# console nowhere; with it, everything down to debug messages, which this level drops.
KERNEL_LOGLEVEL = 4
# The CPU emulator with one thread for all vCPUs: with a thread each (QEMU's default) a guest
# kernel can fault at an instruction it is patching on another vCPU, and panic; on a host of
# few CPUs one thread costs the guest no time that matters.
TCG_ACCEL = ("-accel", "tcg,thread=single")
# The kernel's first words when it faults: a failure's message shows its report from there
KERNEL_FAULT = re.compile(r"(BUG:|Oops:|general protection fault|Kernel panic)")
FAULT_LINES = 40
# qemu as virtme-ng runs it, its exit status written where the host reads it: virtme-ng drops
# that status and says 255 for any guest that ended without its command's status.
QEMU_WRAPPER = """#!/bin/sh
[ "$1" = --version ] && exec {qemu} "$@"
{qemu} {accel} "$@"
status=$?
echo "$status" > {status_file}
exit "$status"
"""


class GuestError(RuntimeError):
    """The guest could not run its command to the end; the message says why and the fix."""


@dataclass(frozen=True)
class GuestResult:
    status: int  # the command's exit status inside the guest
    console: str  # kernel messages and the command's output
    seconds: float  # boot to power-off


def vng() -> Path:
    """vng of this Python's environment (the venv), else of PATH."""
    beside = Path(sys.executable).parent / "vng"
    found = beside if beside.is_file() else shutil.which("vng")
    if found is None:
        raise GuestError(f"virtme-ng (vng) is not installed; fix: {SETUP_FIX}")
    return Path(found)


def check_image(image: Path) -> None:
    """A clear error before any boot: the image must be a readable file."""
    if not image.is_file():
        installed = ", ".join(sorted(str(p) for p in Path("/boot").glob("vmlinuz-*"))) or "none"
        raise GuestError(f"kernel image {image}: no such file (installed: {installed}); give "
                         "a vmlinuz/bzImage path, or `host` for the running kernel")
    if not os.access(image, os.R_OK):
        raise GuestError(f"kernel image {image}: not readable; run as root or chmod it")


def record_for(image: Path, guest: Guest, accel: Accel) -> GuestRecord:
    return GuestRecord(image=str(image), accel=accel.mode, accel_why=accel.why, cpus=guest.cpus,
                       memory_mb=guest.memory_mb, pin=guest.pin)


def vng_argv(image: Path, command: list[str], guest: Guest, accel: Accel,
             rwdirs: list[Path], qemu: Path) -> list[str]:
    argv = [str(vng()), "--run", str(image), "--cpus", str(guest.cpus),
            "--memory", f"{guest.memory_mb}M", "--user", "root", "--disable-monitor",
            "--qemu", str(qemu), "--verbose", "--append", f"loglevel={KERNEL_LOGLEVEL}"]
    if accel.emulated:
        argv.append("--disable-kvm")
    if guest.pin:
        argv += ["--pin", ",".join(str(cpu) for cpu in guest.pin)]
    for directory in rwdirs:
        argv += ["--rwdir", str(directory)]
    return argv + ["--exec", shlex.join(command)]


def run(image: Path, command: list[str], guest: Guest, accel: Accel, rwdirs: list[Path],
        modules: Sequence[str] = ()) -> GuestResult:
    """Boots image, runs command (after loading modules) and returns its exit status;
    GuestError when the kernel does not boot to it, lacks a module, or the guest hangs."""
    check_image(image)
    qemu = shutil.which(QEMU)
    if qemu is None:
        raise GuestError(f"{QEMU} is not installed; fix: {SETUP_FIX}")
    wrapped = [sys.executable, "-m", "harness.guest.inside",
               "--record", record_for(image, guest, accel).model_dump_json(),
               *(f"--module={m}" for m in modules), "--", *command]
    # vng runs virtme-run from PATH: the venv's bin must be on it
    env = {**os.environ, "PATH": f"{vng().parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    with tempfile.TemporaryDirectory(prefix="wanbench-qemu-") as scratch:
        wrapper, status_file = Path(scratch) / "qemu", Path(scratch) / "qemu.status"
        wrapper.write_text(QEMU_WRAPPER.format(
            qemu=shlex.quote(qemu), accel=shlex.join(TCG_ACCEL if accel.emulated else ()),
            status_file=shlex.quote(str(status_file))))
        wrapper.chmod(0o755)
        start = time.monotonic()
        console = Console(vng_argv(image, wrapped, guest, accel, rwdirs, wrapper), env=env)
        finished = False
        try:
            finished = console.read_until(start + guest.timeout_s)
        finally:
            status = console.stop()
        ended = Ended(status, _qemu_status(status_file), time.monotonic() - start)
    return _judge(image, console, finished, ended, guest)


@dataclass(frozen=True)
class Ended:
    """How the guest's processes ended: virtme-ng's status (negative: the signal that ended
    it; None: killed at the stop) and qemu's as a shell reports it (128 + N: signal N; None:
    it never ran to its end)."""

    vng: int | None
    qemu: int | None
    seconds: float


def _qemu_status(status_file: Path) -> int | None:
    try:
        return int(status_file.read_text())
    except (OSError, ValueError):
        return None


def _ended(ended: Ended, console: Console) -> str:
    """How virtme-ng and the qemu it ran ended, and what they and the kernel printed."""
    if ended.vng is not None and ended.vng < 0:
        how = (f"was killed by {_signal_name(-ended.vng)} after {ended.seconds:.0f} s, "
               f"from outside wanbench (wanbench stops a guest only at its timeout)")
    else:
        how = f"exited with status {ended.vng} after {ended.seconds:.0f} s"
    if ended.qemu is None:
        qemu = "qemu did not run to its end"
    elif ended.qemu > 128:
        qemu = f"qemu was killed by {_signal_name(ended.qemu - 128)}"
    else:
        qemu = f"qemu exited with status {ended.qemu}"
    said = _last_words(console)
    return f"virtme-ng {how} ({qemu}); " + (
        f"its and the kernel's last output lines:\n{said}" if said else "it printed nothing")


def _last_words(console: Console) -> str:
    """The console's last lines, or the kernel's fault report from its first line."""
    fault = KERNEL_FAULT.search(console.text)
    if fault is None:
        return console.tail()
    start = console.text.rfind("\n", 0, fault.start()) + 1  # the line it starts on, whole
    lines = [ln.rstrip() for ln in console.text[start:].splitlines() if ln.strip()]
    return "\n".join(lines[:FAULT_LINES])


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _judge(image: Path, console: Console, finished: bool, ended: Ended,
           guest: Guest) -> GuestResult:
    """The command's result, or GuestError naming what ended the guest: the kernel only when
    virtme-ng ran it to the end (status 0) without the command starting."""
    text = console.text
    missing = re.search(rf"{inside.MISSING_MODULE} (\S+): (.*)", text)
    if missing:
        raise GuestError(f"kernel {image} lacks module {missing.group(1)} that the run needs "
                         f"({missing.group(2).strip()}); fix: a kernel built with it (e.g. "
                         "Debian's generic flavour) or another topology backend")
    if not finished:
        where = ("its command did not finish" if inside.STARTED in text
                 else "it did not boot to its command")
        raise GuestError(f"kernel {image}: guest hung ({where} within guest.timeout_s = "
                         f"{guest.timeout_s:g} s) and was killed; last console lines:\n"
                         f"{_last_words(console)}")
    if inside.STARTED not in text and ended.vng != 0:
        raise GuestError(f"kernel {image}: the guest ended before its command started: "
                         f"{_ended(ended, console)}")
    if inside.STARTED not in text:
        raise GuestError(f"kernel {image} did not boot to the command (a kernel for this "
                         "architecture with virtio and 9p, e.g. Debian's generic flavour, "
                         f"not -cloud?); last console lines:\n{console.tail()}")
    exited = re.search(rf"{inside.EXITED} (-?\d+)", text)
    if exited is None:
        raise GuestError(f"kernel {image}: the guest stopped before its command finished "
                         f"(a crash or panic?); {_ended(ended, console)}")
    return GuestResult(int(exited.group(1)), text, ended.seconds)
