"""What `wanbench run` leaves behind and measures when processes die or signals arrive:
servers die with the runner, a stranger on the port is never measured, a dead server
fails its point, and a stop signal during bring-up tears down at once."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from harness.metrics.cpu import process_tree
from harness.topology.ledger import Ledger
from tests.conftest import build, needs_root
from tests.runner.test_run import (
    REPO,
    WANBENCH,
    _start,
    _wait_for_records,
    run_dirs,
    write_scenario,
)


@pytest.fixture(scope="module", autouse=True)
def binaries():
    build("build/bin/wb-server")
    build("build/bin/wb-sclient")


def _processes_with(marker: str) -> list[int]:
    """PIDs other than this test's whose command line contains marker."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in argv:
            found.append(int(entry.name))
    return found


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what} within {timeout} s")


# A server shaped like nginx: a master that forks a worker, which serves the socket. Only the
# master is the runner's child, so a parent-death signal alone never reaches the worker.
FORKING_SERVER = """
import http.server, os, socket, sys, time
class Reply(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args): pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Reply)
if os.fork() == 0:
    server.serve_forever()
os.wait()
"""


def _forking_scenario(tmp_path: Path, port: int, duration_s: float = 20) -> Path:
    script = tmp_path / "forking_server.py"
    script.write_text(FORKING_SERVER)
    return write_scenario(tmp_path, f"""
name: forking
topology: {{file: topologies/loopback.yaml}}
server:
  kind: external
  name: forking
  port: {port}
  command: [{sys.executable}, {script}, "{{port}}"]
hot: {{generator: sclient, conns: 2, rate_rps: 100}}
repetitions: 1
warmup_s: 0.2
duration_s: {duration_s}
""")


def test_sigkill_of_the_runner_leaves_no_server_worker(tmp_path: Path, port: int):
    scenario = _forking_scenario(tmp_path, port)
    proc = _start(["run", str(scenario), "--out", str(tmp_path / "results")])
    script = str(tmp_path / "forking_server.py")
    # master and worker both up: the worker is the master's child
    _wait(lambda: len(_processes_with(script)) >= 3, 30, "no forked server worker")
    time.sleep(0.5)
    proc.kill()
    proc.wait()
    _wait(lambda: not _processes_with(script), 3, f"server processes {_processes_with(script)} "
          "outlived the runner")


def test_a_stranger_listening_on_the_port_is_not_measured(tmp_path: Path, port: int):
    # What an orphan of an earlier run looks like to the next one: the port is held, the
    # server just started cannot have it, and the load would reach the orphan.
    stranger = socket.create_server(("127.0.0.1", port))
    script = tmp_path / "never_listens.py"
    script.write_text("import time\ntime.sleep(60)\n")
    scenario = write_scenario(tmp_path, f"""
name: stranger
topology: {{file: topologies/loopback.yaml}}
server:
  kind: external
  name: sleeper
  port: {port}
  command: [{sys.executable}, {script}]
hot: {{generator: sclient, conns: 2, rate_rps: 100}}
repetitions: 1
warmup_s: 0.2
duration_s: 1
""")
    with stranger:
        done = subprocess.run(WANBENCH + ["run", str(scenario), "--out", str(tmp_path / "r"),
                                          "--allow-invalid"],
                              cwd=REPO, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, "--allow-invalid: exit 0 although the point is invalid"
    (run,) = run_dirs(tmp_path / "r")
    point = pd.read_parquet(run / "points.parquet").iloc[0]
    assert not point["valid"]
    assert f"port {port} is also held by pid {os.getpid()}" in point["invalid_reason"]
    assert pd.isna(point.get("reply_rate_rps")), "nothing may be measured from the stranger"


TWO_POINTS = """
name: dying
topology: {file: topologies/loopback.yaml}
hot: {generator: sclient, conns: 2, rate_rps: 200}
sweep:
  server.dispatch: [poll, epoll]
repetitions: 1
warmup_s: 0.2
duration_s: 3
"""


def _wb_server_of(run_root: Path) -> int | None:
    for pid in _processes_with(str(run_root)):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "wb-server":
                return pid
        except OSError:
            continue
    return None


def test_a_server_that_dies_fails_its_point_and_the_sweep_goes_on(tmp_path: Path):
    out = tmp_path / "results"
    proc = _start(["run", str(write_scenario(tmp_path, TWO_POINTS)), "--out", str(out)])
    # the first point's generator is running: its server dies inside the window
    _wait(lambda: list(out.glob("*/*/raw/*/hot.stderr")), 30, "no hot generator started")
    time.sleep(1.0)
    os.kill(_wait(lambda: _wb_server_of(out), 5, "no wb-server"), signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=120)
    assert "Traceback" not in stderr, stderr
    assert proc.returncode == 1, "an invalid point makes the exit status 1"
    (run,) = run_dirs(out)
    # the table's medians leave the failed repetition out and count it
    poll_row = next(line for line in stdout.splitlines() if line.split()[:1] == ["poll"])
    # no valid repetition: what the invalid one measured is marked as not a result (*)
    assert "0/1" in poll_row and ("*" in poll_row or "—" in poll_row), poll_row
    assert "invalid dispatch=poll rep 0: the server exited" in " ".join(stderr.split())
    points = pd.read_parquet(run / "points.parquet").set_index("dispatch")
    assert len(points) == 2, "the sweep must go on after a failed point"
    assert not points.loc["poll", "valid"]
    assert "the server exited during the point" in points.loc["poll", "invalid_reason"]
    assert points.loc["epoll", "reply_rate_rps"] > 0


@pytest.mark.timing
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_stop_signal_while_measuring_exits_128_plus_signal(tmp_path: Path, sig: int):
    out = tmp_path / "results"
    proc = _start(["run", str(write_scenario(tmp_path, TWO_POINTS)), "--out", str(out)])
    run = _wait_for_records(out, 1)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig
    assert f"wanbench run --resume {run}" in "".join(stderr.split("\n"))
    # its generators get the parent-death signal as it exits, and a generator holding
    # connections closes them and writes its result first: gone within seconds
    try:
        _wait(lambda: not _processes_with(str(out)), 10, "the run's processes not all gone")
    except AssertionError as gone:
        left = {pid: (_cmdline(pid)[:200], Path(f"/proc/{pid}/stat").read_text().split()[2:5])
                for pid in _processes_with(str(out))}
        raise AssertionError(f"{gone}: {left}") from None


WAN = """
name: wan-bringup
topology: {file: topologies/dumbbell-wan.yaml}
hot: {generator: sclient, conns: 2, rate_rps: 100}
repetitions: 1
warmup_s: 0.2
duration_s: 1
"""


def _agent_of(runner: int) -> bool:
    return any(b"rtt_agent" in _cmdline(pid) for pid in process_tree(runner)[1:])


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # it exited since the tree was read
        return b""


def _namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


@pytest.mark.timing
@needs_root
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_stop_signal_during_calibration_tears_down_at_once(tmp_path: Path, sig: int,
                                                           monkeypatch):
    build("build/bin/wb-linkem")
    monkeypatch.setenv("WANBENCH_TOPO_STATE", str(tmp_path / "state"))
    out = tmp_path / "results"
    proc = subprocess.Popen(WANBENCH + ["run", str(write_scenario(tmp_path, WAN)), "--out",
                                        str(out)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    _wait(lambda: _agent_of(proc.pid), 60, "calibration never started")
    # this run's prefix, from its ledger: the rest of the suite may build namespaces meanwhile
    (ledger,) = Ledger.load_all(tmp_path / "state")
    ours = {ns for ns in _namespaces() if ns.startswith(ledger.prefix + "-")}
    assert ours, "the run's namespaces were built"
    sent = time.monotonic()
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    took = time.monotonic() - sent
    assert proc.returncode == 128 + sig, stderr
    assert "Traceback" not in stderr, stderr
    (run,) = run_dirs(out)
    assert f"wanbench run --resume {run}" in "".join(stderr.split("\n"))
    assert took < 15, f"teardown took {took:.1f} s"
    assert not ours & _namespaces(), "the run's namespaces must be gone"
    assert not list((tmp_path / "state").glob("*.json")), "the ledger must be gone"


@pytest.mark.timing
@needs_root
def test_a_stopped_kernel_host_run_tears_its_own_topology_down(tmp_path: Path, monkeypatch):
    # `run --kernel host` runs the scenario in a child `wanbench run`: stopped, the parent
    # passes the signal on and waits for the child's teardown rather than killing it
    build("build/bin/wb-linkem")
    monkeypatch.setenv("WANBENCH_TOPO_STATE", str(tmp_path / "state"))
    out = tmp_path / "results"
    proc = subprocess.Popen(WANBENCH + ["run", str(write_scenario(tmp_path, WAN)), "--kernel",
                                        "host", "--out", str(out)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait(lambda: _agent_of(proc.pid), 60, "the host run's calibration never started")
    (ledger,) = Ledger.load_all(tmp_path / "state")
    ours = {ns for ns in _namespaces() if ns.startswith(ledger.prefix + "-")}
    assert ours, "the host run's namespaces were built"
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert "Traceback" not in stderr, stderr
    assert not ours & _namespaces(), "the host run's namespaces must be gone"
    assert not list((tmp_path / "state").glob("*.json")), "its ledger must be gone"
    assert not _processes_with(str(out)), "nothing of the host run may be left running"
