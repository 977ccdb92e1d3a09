"""A generator given the runner's window (CLOCK_MONOTONIC instants) measures exactly it,
reports the edges it used, and stays until its stdin ends."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clients import LoadSpec, command, validate
from harness.servers import RunningServer
from tests.clients.conftest import GENERATOR_CPU

S = 1_000_000_000
RATE = 1000


def _spec(server: RunningServer, generator: str, start_ns: int, end_ns: int) -> LoadSpec:
    return LoadSpec(generator=generator, targets=[server.address], hot_conns=10,
                    rate_rps=RATE, cpu=GENERATOR_CPU, window_start_ns=start_ns,
                    window_end_ns=end_ns)


def _run_held(spec: LoadSpec, end_ns: int) -> dict:
    """Runs spec; past the window's end the generator must still be there, until its stdin
    is closed."""
    proc = subprocess.Popen(command(spec), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(max(0, end_ns - time.monotonic_ns()) / S + 0.3)
        assert proc.poll() is None, "exited before its stdin was closed"
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("generator", ["sclient", "asyncio"])
def test_a_window_in_the_future_is_counted_exactly(server, sclient, generator):
    start = time.monotonic_ns() + S  # the generator warms up until then
    end = start + 3 * S // 2
    doc = _run_held(_spec(server, generator, start, end), end)
    validate(doc)
    assert doc["window"] == {"start_ns": start, "end_ns": end}
    assert doc["duration_s"] == pytest.approx(1.5, abs=1e-6)
    # a fixed schedule: 1,000 sends a second whose intended time is in the window
    assert abs(doc["requests"]["scheduled"] - 1.5 * RATE) <= 2
    assert doc["requests"]["sent"] == pytest.approx(1.5 * RATE, rel=0.02)


def test_a_window_already_started_counts_from_the_generators_own_start(server, sclient):
    given = time.monotonic_ns() - 5 * S
    end = time.monotonic_ns() + S
    doc = _run_held(_spec(server, "sclient", given, end), end)
    started, counted_to = doc["window"]["start_ns"], doc["window"]["end_ns"]
    assert given + 5 * S - S // 2 < started < end  # its own start, not the given one
    assert counted_to == end
    assert doc["duration_s"] == pytest.approx((end - started) / S, abs=1e-6)
    assert doc["requests"]["sent"] == pytest.approx(RATE * doc["duration_s"], rel=0.05)


@pytest.mark.parametrize("generator", ["sclient", "asyncio"])
def test_a_stop_signal_in_the_window_ends_it_without_waiting_for_stdin(server, sclient,
                                                                       tmp_path: Path,
                                                                       generator: str):
    """The runner stops a point's generator with one SIGTERM and leaves its stdin open: it
    used to hold on, after its shortened window, until killed 10 s later."""
    start = time.monotonic_ns()
    end = start + 60 * S
    out, err = tmp_path / "out.json", tmp_path / "err.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(command(_spec(server, generator, start, end)),
                                stdin=subprocess.PIPE, stdout=stdout, stderr=stderr)
    try:
        time.sleep(2)  # the interpreter's start-up too
        proc.send_signal(signal.SIGTERM)
        status = proc.wait(timeout=20)  # stdin still open
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
    assert status == 0, err.read_text()
    doc = json.loads(out.read_text().strip().splitlines()[-1])
    assert doc["window"]["end_ns"] < end  # the window it measured ended at the signal


@pytest.mark.parametrize("argv, said", [
    (["--window-start-ns", "5"], "go together"),
    (["--window-start-ns", "9", "--window-end-ns", "5"], "is not after"),
    (["--window-start-ns", "1.5", "--window-end-ns", "5"], "whole ns"),
])
def test_wb_sclient_refuses_a_window_it_cannot_measure(sclient, argv, said):
    out = subprocess.run([str(sclient), "--target", "127.0.0.1:9", "--hot-conns", "1", *argv],
                         capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and said in out.stderr, out.stderr


def test_asyncgen_refuses_half_a_window():
    out = subprocess.run([sys.executable, "-m", "clients.asyncgen", "--target", "127.0.0.1:9",
                          "--hot-conns", "1", "--window-start-ns", "5"],
                         capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
                         cwd=Path(__file__).parents[2])
    assert out.returncode == 2 and "go together" in out.stderr, out.stderr


def test_loadspec_refuses_half_a_window_or_an_empty_one():
    with pytest.raises(ValueError, match="go together"):
        LoadSpec(generator="sclient", targets=["127.0.0.1:9"], hot_conns=1, window_start_ns=5)
    with pytest.raises(ValueError, match="not after"):
        LoadSpec(generator="sclient", targets=["127.0.0.1:9"], hot_conns=1,
                 window_start_ns=5, window_end_ns=5)
