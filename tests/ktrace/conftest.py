"""wb-ktrace and wb-whoran built (where the kernel has BTF) and allowed to run (root, or
CAP_BPF), a known workload to trace, and a loader driven over its stdin as the harness drives
it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.metrics import ktrace, whoran
from harness.metrics.ktrace import loaded_objects
from tests.conftest import REPO, build

WORKLOAD = Path(__file__).with_name("workload.py")


def _built(tool: str) -> Path:
    if not ktrace.VMLINUX_BTF.exists():
        pytest.skip(f"this kernel has no BTF ({ktrace.VMLINUX_BTF}): {tool} is not built")
    return build(f"build/bin/{tool}")


@pytest.fixture(scope="session")
def ktrace_built() -> Path:
    """The call timer, built; what it says needs no BPF."""
    return _built(ktrace.CALL_TIMER)


@pytest.fixture(scope="session")
def ktrace_bin(ktrace_built: Path) -> Path:
    """The loader, where this machine lets it load and attach its programs."""
    ktrace.support.cache_clear()
    allowed = ktrace.support()
    if not allowed.tracepoints:
        pytest.skip(f"BPF tracing cannot run here: {allowed.detail}")
    return ktrace_built


@pytest.fixture(scope="session")
def whoran_built() -> Path:
    """The who-ran tracer, built; what it says needs no BPF."""
    return _built(ktrace.WHO_RAN)


@pytest.fixture(scope="session")
def whoran_bin(whoran_built: Path) -> Path:
    """The who-ran tracer, where this machine lets it load and attach its programs."""
    whoran.cannot_run.cache_clear()
    why = whoran.cannot_run()
    if why is not None:
        pytest.skip(f"BPF tracing cannot run here: {why}")
    return whoran_built


def exchange(proc: subprocess.Popen, line: str | None = None) -> str:
    """Send a line (if any) to a child's stdin; its next line of output."""
    assert proc.stdin is not None and proc.stdout is not None
    if line:
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
    return proc.stdout.readline().strip()


class Loader:
    """A tracer under the control protocol: ready at start, then start() and stop()."""

    def __init__(self, binary: Path, *args: str):
        self.proc = subprocess.Popen([str(binary), *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert exchange(self.proc) == "ready", self.proc.stderr.read() if self.proc.stderr else ""

    def start(self, at_ns: int | None = None) -> None:
        assert exchange(self.proc, "start" if at_ns is None else f"start {at_ns}") == "started"

    def stop(self, at_ns: int | None = None) -> dict:
        document = json.loads(exchange(self.proc, "stop" if at_ns is None else f"stop {at_ns}"))
        assert self.proc.wait(timeout=10) == 0
        return document

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Workload:
    """tests/ktrace/workload.py: `calls` dispatch calls over `fds` idle descriptors when run()."""

    def __init__(self, kind: str, fds: int, calls: int, fork: bool = False):
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKLOAD), kind, str(fds), str(calls)]
            + (["--fork"] if fork else []),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
        self.pid = int(exchange(self.proc))

    def run(self) -> None:
        assert exchange(self.proc, "go") == "done"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def workloads() -> Iterator[list[Workload]]:
    """Workloads a test starts, stopped whatever happens."""
    started: list[Workload] = []
    yield started
    for workload in started:
        workload.close()


def traced(binary: Path, kind: str, fds: int, calls: int, fork: bool = False,
           extra: tuple[str, ...] = ()) -> dict:
    """The loader's document over one workload's calls (its window is exactly theirs)."""
    workload = Workload(kind, fds, calls, fork)
    loader = Loader(binary, "--pid", str(workload.pid), *extra)
    try:
        loader.start()
        workload.run()
        return loader.stop()
    finally:
        loader.close()
        workload.close()


def median_bucket(family: dict) -> int:
    """The log2 histogram's median bucket: robust to the odd call the hypervisor stretched."""
    hist, seen = family["hist_log2_ns"], 0
    for bucket, count in enumerate(hist):
        seen += count
        if 2 * seen >= sum(hist):
            return bucket
    raise AssertionError("an empty histogram")


def gone_within(seconds: float) -> list[str]:
    """What is left once the kernel has freed what it frees (after an RCU grace period)."""
    deadline = time.monotonic() + seconds
    while (left := loaded_objects()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left
