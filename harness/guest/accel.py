"""How this machine's guests run: under KVM when a probe guest actually runs under it (a
/dev/kvm that exists may still fail at the first instruction it cannot virtualise, as
nested KVM does here), else under QEMU's CPU emulator (TCG)."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness.guest.console import Console

QEMU = "qemu-system-x86_64"
PROBE_TIMEOUT_S = 20.0
# The kernel's first console line: guest code ran under KVM up to the kernel's printk.
BOOTED = "Linux version"
KVM_FAILURES = ("KVM internal error", "failed to initialize kvm", "Could not access KVM")


@dataclass(frozen=True)
class Accel:
    mode: Literal["kvm", "tcg"]
    why: str

    @property
    def emulated(self) -> bool:
        return self.mode == "tcg"


def probe(image: Path) -> Accel:
    """Boots `image` under KVM just far enough to print its banner, then stops it."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return Accel("tcg", "/dev/kvm is missing or not accessible: the CPU is emulated")
    if shutil.which(QEMU) is None:
        return Accel("tcg", f"{QEMU} is not installed, so KVM could not be probed")
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
        return Accel("kvm", f"a probe guest ({image.name}) booted under KVM")
    failure = next((line[line.index(f):].strip() for line in console.text.splitlines()
                    for f in KVM_FAILURES if f in line), None)
    if failure is None:
        failure = (f"no kernel banner within {PROBE_TIMEOUT_S:g} s" if not finished
                   else f"qemu exited: {console.tail(3) or 'no output'}")
    return Accel("tcg", f"/dev/kvm exists but a probe guest failed under it ({failure}): "
                 "nested KVM does not work here, the CPU is emulated")
