"""Nothing of wb-ktrace or wb-whoran stays in the kernel: no program, map or link after a
window, after SIGTERM, after SIGKILL, of the loader or of the whole run, or after either's
probe; their sanitizer builds run a window cleanly."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.metrics.ktrace import loaded_objects
from tests.conftest import REPO, build
from tests.ktrace.conftest import Loader, Workload, gone_within, traced

pytestmark = pytest.mark.skipif(shutil.which("bpftool") is None,
                                reason="bpftool is not installed (apt-get install bpftool)")


def test_a_window_leaves_nothing_behind(ktrace_bin: Path):
    assert not gone_within(5), "a program of an earlier run is still loaded"
    traced(ktrace_bin, "select", 10, 10)
    assert not gone_within(5)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_loader_killed_while_counting_leaves_nothing_behind(ktrace_bin: Path, sig: int):
    workload = Workload("select", 10, 10)
    loader = Loader(ktrace_bin, "--pid", str(workload.pid))
    try:
        loader.start()
        held = loaded_objects()
        # the check sees them while they are there: every window program linked
        assert "kt_sys_enter" in held and "kt_calls" in held and "link to kt_sys_exit" in held
        loader.proc.send_signal(sig)
        loader.proc.wait(timeout=10)
    finally:
        loader.close()
        workload.close()
    assert not gone_within(5)


@pytest.mark.parametrize("tool", ["ktrace_bin", "whoran_bin"])
def test_the_probe_leaves_nothing_behind(tool: str, request: pytest.FixtureRequest):
    done = subprocess.run([str(request.getfixturevalue(tool)), "--probe"], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0 and json.loads(done.stdout)["tracepoints"] is True
    assert not gone_within(5)


def test_the_sanitizer_build_runs_a_window_cleanly(ktrace_bin: Path):
    asan = build("build/asan/bin/wb-ktrace")
    document = traced(asan, "select", 10, 50)  # Loader.stop asserts exit status 0
    assert document["roles"]["server"]["select"]["calls"] == 50


def test_the_who_ran_sanitizer_build_runs_a_window_cleanly(whoran_bin: Path):
    asan = build("build/asan/bin/wb-whoran")
    workload = Workload("select", 10, 50)
    loader = Loader(asan, "--cpu", "0", "--pid", str(workload.pid))
    try:
        loader.start()
        workload.run()
        document = loader.stop()  # asserts exit status 0
    finally:
        loader.close()
        workload.close()
    assert document["who_ran"]["role"] == "server" and document["events"]["runs"] > 0
    assert not gone_within(5)


LONG_TRACED_POINT = """
name: ktrace-killed
topology: {file: topologies/loopback.yaml}
server: {dispatch: epoll}
hot: {generator: sclient, conns: 2, rate_rps: 200}
warmup_s: 0.2
duration_s: 30
kernel_trace: true
"""


def test_a_run_killed_mid_window_leaves_nothing_behind(ktrace_bin: Path, tmp_path: Path):
    build("build/bin/wb-server")
    build("build/bin/wb-sclient")
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(LONG_TRACED_POINT)
    run = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", str(scenario), "--out",
                            str(tmp_path / "results")], cwd=REPO, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while "link to kt_sys_enter" not in loaded_objects():  # the window is being traced
            assert run.poll() is None and time.monotonic() < deadline, "no traced window"
            time.sleep(0.1)
        run.kill()
        run.wait()
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert not gone_within(5)


SCHED_FIFO = 1


def _policy(pid: int) -> int:
    """The scheduling policy /proc/PID/sched shows (0 SCHED_OTHER, 1 SCHED_FIFO)."""
    line = next(ln for ln in Path(f"/proc/{pid}/sched").read_text().splitlines()
                if ln.startswith("policy"))
    return int(line.split(":")[1])


@pytest.mark.parametrize(("tool", "args"), [("ktrace_bin", ("--pid", "1")),
                                            ("whoran_bin", ("--cpu", "0", "--pid", "1"))])
def test_a_loader_waits_for_its_window_edges_ahead_of_other_tasks(
        tool: str, args: tuple[str, ...], request: pytest.FixtureRequest):
    # the other tasks on its CPU must not delay the instant counting switches on or off: it
    # waits for both at real-time priority, and loads and reports at the ordinary one
    loader = Loader(request.getfixturevalue(tool), *args)
    try:
        assert _policy(loader.proc.pid) == SCHED_FIFO
        start = time.monotonic_ns() + 50_000_000
        loader.start(start)
        assert _policy(loader.proc.pid) == SCHED_FIFO
        document = loader.stop(start + 100_000_000)
    finally:
        loader.close()
    assert document["window"]["start_ns"] >= start
