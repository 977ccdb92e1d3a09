"""Fixtures for the load-generator tests: built binaries and a wb-server to load."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import build

SERVER_CPU, GENERATOR_CPU = 0, 1 % os.cpu_count()


@dataclass
class Server:
    proc: subprocess.Popen
    addr: str
    stats_path: Path

    @property
    def port(self) -> int:
        return int(self.addr.rsplit(":", 1)[1])

    def stats(self) -> dict:
        """A fresh stats snapshot (SIGUSR1 makes wb-server write it)."""
        before = self.stats_path.stat().st_mtime_ns if self.stats_path.exists() else 0
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if self.stats_path.exists() and self.stats_path.stat().st_mtime_ns != before:
                return json.loads(self.stats_path.read_text())
            time.sleep(0.02)
        raise AssertionError("wb-server wrote no stats snapshot after SIGUSR1")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_server(tmp: Path, listen: str = "127.0.0.1:0", *extra: str) -> Server:
    binary = build("build/bin/wb-server")
    stats = tmp / f"stats-{time.monotonic_ns()}.json"
    proc = subprocess.Popen(
        [str(binary), "--dispatch", "epoll", "--accept", "multi", "--reply-bytes", "92",
         "--listen", listen, "--stats", str(stats), "--cpu", str(SERVER_CPU), *extra],
        stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("ready "):
        proc.kill()
        proc.wait()
        raise AssertionError(f"wb-server did not start: {line!r}")
    return Server(proc, line.split()[1], stats)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = start_server(tmp_path)
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def sclient() -> Path:
    return build("build/bin/wb-sclient")


def wait_line(proc: subprocess.Popen, timeout: float) -> dict:
    """The next JSON event line from a generator's stdout (e.g. cold_ready)."""
    import selectors

    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(timeout):
        raise AssertionError(f"no event line within {timeout} s")
    return json.loads(proc.stdout.readline())


def stop_generator(proc: subprocess.Popen, timeout: float = 10) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else proc.returncode
