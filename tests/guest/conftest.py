"""Guest test fixtures: the Debian 6.12 generic kernel, virtme-ng and QEMU, or a skip that
says what is missing; and a check that no guest process outlives its test."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import psutil
import pytest

from harness.guest import machine
from harness.guest.accel import QEMU

GUEST_PROCESSES = (QEMU, "virtiofsd")


def _guest_processes() -> set[int]:
    return {p.pid for p in psutil.process_iter(["name"]) if p.info["name"] in GUEST_PROCESSES}


@pytest.fixture(scope="session")
def guest_kernel() -> Path:
    """The newest Debian 6.12 generic kernel (sch_netem and 9p as modules)."""
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces and tc inside the guest)")
    images = sorted(Path("/boot").glob("vmlinuz-6.12.*-amd64"))
    if not images:
        pytest.skip("no /boot/vmlinuz-6.12.*-amd64: `bash scripts/setup-system.sh test` "
                    "installs Debian's linux-image-6.12.*-amd64-unsigned")
    if shutil.which(QEMU) is None:
        pytest.skip(f"{QEMU} missing: `bash scripts/setup-system.sh` installs it")
    try:
        machine.vng()
    except machine.GuestError as exc:
        pytest.skip(str(exc))
    return images[-1]


@pytest.fixture
def no_guest_left():
    """Fails the test if a qemu or virtiofsd it started is still running afterwards."""
    before = _guest_processes()
    yield
    left = _guest_processes() - before
    for pid in left:
        psutil.Process(pid).kill()
    assert not left, f"guest processes left running: {sorted(left)}"
