"""Guest test fixtures: the Debian 6.12 generic kernel, virtme-ng and QEMU, or a skip that
says what is missing; and a check that no guest process outlives its test."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import time
from pathlib import Path

import psutil
import pytest

from harness.guest import accel, machine
from harness.guest.accel import QEMU
from harness.scenario import Guest
from tests.conftest import build
from tests.guest import both_inside

GUEST_PROCESSES = (QEMU, "virtiofsd")
OWNER = "WANBENCH_TEST_GUEST"  # in the environment of the guests a test starts


def _guest_processes(owner: str) -> set[int]:
    """The qemu and virtiofsd processes started with owner in their environment: this test's,
    never those of another test session on the machine (killing them failed its guests)."""
    found = set()
    for process in psutil.process_iter(["name"]):
        if process.info["name"] in GUEST_PROCESSES:
            try:
                if process.environ().get(OWNER) == owner:
                    found.add(process.pid)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
    return found


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
def no_guest_left(monkeypatch):
    """Fails the test if a qemu or virtiofsd it started is still running afterwards (its
    guests inherit a mark of the test's from the environment)."""
    owner = secrets.token_hex(8)
    monkeypatch.setenv(OWNER, owner)
    yield
    left = _guest_processes(owner)
    for pid in left:
        psutil.Process(pid).kill()
    assert not left, f"guest processes left running: {sorted(left)}"


@pytest.fixture(scope="session")
def kernel_6_12_measured(guest_kernel, tmp_path_factory) -> Path:
    """One boot of the 6.12 guest running tests/guest/both_inside.py (wb-ktrace's function
    grain, live netem, then a guest's run): the folder holding ktrace.json, netem.json and
    run.json."""
    for target in ("build/bin/wb-ktrace", "build/bin/wb-server", "build/bin/wb-sclient"):
        build(target)
    out = tmp_path_factory.mktemp("guest-6.12")
    mode = accel.probe(guest_kernel)
    start = time.monotonic()
    # -m from the repository (the guest's working directory): this tree's harness and tests
    result = machine.run(guest_kernel, [sys.executable, "-m", "tests.guest.both_inside",
                                        str(out)],
                         Guest(cpus=2, memory_mb=1024, timeout_s=900), mode, [out],
                         ["sch_netem", "veth"])
    took = out / both_inside.TOOK
    print(f"guest ({mode.mode}) booted and measured in {time.monotonic() - start:.0f} s; "
          f"inside: {took.read_text() if took.exists() else 'no times'}")
    assert result.status == 0, result.console[-3000:]
    return out


def measured_part(folder: Path, name: str) -> dict:
    """One part's results from kernel_6_12_measured; its traceback fails the test."""
    document = json.loads((folder / name).read_text())
    if "error" in document:
        pytest.fail(f"{name} in the guest failed:\n{document['error']}")
    return document
