"""Fixtures for the load-generator tests: built binaries and a wb-server to load."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.servers import RunningServer, ServerConfig, running
from tests.conftest import build

SERVER_CPU, GENERATOR_CPU = 0, 1 % os.cpu_count()


def server_config(tmp: Path, **kw) -> ServerConfig:
    return ServerConfig(cpu=SERVER_CPU, stats_path=tmp / "server-stats.json", **kw)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RunningServer]:
    build("build/bin/wb-server")
    with running(server_config(tmp_path)) as srv:
        yield srv


@pytest.fixture(scope="session")
def sclient() -> Path:
    return build("build/bin/wb-sclient")


def wait_line(proc: subprocess.Popen, timeout: float) -> dict:
    """The next JSON event line from a generator's stdout (e.g. cold_ready)."""
    with selectors.DefaultSelector() as sel:
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
