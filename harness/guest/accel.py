"""How this machine's guests run: under KVM when a probe guest actually runs under it (a
/dev/kvm that exists may still fail at the first instruction it cannot virtualise, as
nested KVM does here), else under QEMU's CPU emulator (TCG).

A probe boots firmware under KVM, seconds of the host's time, and its answer holds until the
machine boots again, KVM's module is loaded again (a new /dev/kvm), or QEMU or the image
changes: it is kept under the cache (clients.paths.cache_dir) for what it was asked of."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from clients.atomic import write_atomic
from clients.paths import cache_dir
from harness.guest.console import Console

QEMU = "qemu-system-x86_64"
PROBE_TIMEOUT_S = 20.0
# The kernel's first console line: guest code ran under KVM up to the kernel's printk.
BOOTED = "Linux version"
KVM_FAILURES = ("KVM internal error", "failed to initialize kvm", "Could not access KVM")
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
PROBES_FILE = "kvm-probes.json"


@dataclass(frozen=True)
class Accel:
    mode: Literal["kvm", "tcg"]
    why: str

    @property
    def emulated(self) -> bool:
        return self.mode == "tcg"


def probe(image: Path) -> Accel:
    """Boots `image` under KVM just far enough to print its banner, then stops it; or the
    answer a probe of the same image gave on this machine since it booted."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return Accel("tcg", "/dev/kvm is missing or not accessible: the CPU is emulated")
    qemu = shutil.which(QEMU)
    if qemu is None:
        return Accel("tcg", f"{QEMU} is not installed, so KVM could not be probed")
    boot, asked = BOOT_ID.read_text().strip(), _asked(qemu, image)
    probes = _probes(boot)
    if asked in probes:
        mode, why = probes[asked]
        return Accel(mode, f"{why} (probed earlier since the machine booted: delete "
                           f"{cache_dir() / PROBES_FILE} to probe again)")
    found, lasting = _boot_under_kvm(image)
    if lasting:
        probes[asked] = (found.mode, found.why)
        cache_dir().mkdir(parents=True, exist_ok=True)
        write_atomic(cache_dir() / PROBES_FILE,
                     json.dumps({"boot_id": boot, "probes": probes}).encode())
    return found


def _asked(qemu: str, image: Path) -> str:
    """What a probe's answer depends on besides the boot: this /dev/kvm, this QEMU, this
    image (each file's identity and change times)."""
    files = []
    for path in ("/dev/kvm", qemu, str(image)):
        st = os.stat(path)
        files.append(f"{path} {st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns} "
                     f"{st.st_ctime_ns}")
    return hashlib.sha256("\n".join(files).encode()).hexdigest()


def _probes(boot: str) -> dict[str, tuple[str, str]]:
    """The answers kept since this boot; none from an earlier boot, or from a file that
    cannot be read."""
    try:
        kept = json.loads((cache_dir() / PROBES_FILE).read_text())
        if kept["boot_id"] == boot:
            return {asked: (mode, why) for asked, (mode, why) in kept["probes"].items()}
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return {}


def _boot_under_kvm(image: Path) -> tuple[Accel, bool]:
    """The probe itself, and whether its answer lasts: a banner, or KVM's own failure; not a
    guest that was slow or a QEMU that failed otherwise (a busy machine, a full disk)."""
    console = Console([QEMU, "-accel", "kvm", "-m", "256", "-nographic", "-nodefaults",
                       "-no-reboot", "-serial", "stdio", "-kernel", str(image),
                       "-append", "console=ttyS0 earlyprintk=ttyS0 panic=-1"])
    try:
        finished = console.read_until(
            time.monotonic() + PROBE_TIMEOUT_S,
            lambda text: BOOTED in text or any(f in text for f in KVM_FAILURES))
    finally:
        console.stop()
    if BOOTED in console.text:
        return Accel("kvm", f"a probe guest ({image.name}) booted under KVM"), True
    failure = next((line[line.index(f):].strip() for line in console.text.splitlines()
                    for f in KVM_FAILURES if f in line), None)
    lasting = failure is not None
    if failure is None:
        failure = (f"no kernel banner within {PROBE_TIMEOUT_S:g} s" if not finished
                   else f"qemu exited: {console.tail(3) or 'no output'}")
    return Accel("tcg", f"/dev/kvm exists but a probe guest failed under it ({failure}): "
                 "nested KVM does not work here, the CPU is emulated"), lasting
