"""Shared test fixtures: built binaries, free ports, root and capability checks."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


# A script that holds its CPU 5 ms in every 50 (run at real-time priority: chrt -f), as kdamond,
# a kernel thread the kernel does not preempt, held the demo's generator's CPU 1-4 ms at a time
STALLER = """
import time
while True:
    until = time.monotonic() + 0.005
    while time.monotonic() < until:
        pass
    time.sleep(0.045)
"""


def build(target: str) -> Path:
    """Build one make target (e.g. build/bin/wb-server) and return its path."""
    subprocess.run(["make", "-s", "-C", str(REPO), target], check=True)
    return REPO / target


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(autouse=True, scope="session")
def _private_analysis_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """`wanbench plot` caches under the user's ~/.cache: the tests keep theirs apart."""
    os.environ["WANBENCH_CACHE"] = str(tmp_path_factory.mktemp("wanbench-cache"))


@pytest.fixture
def port() -> int:
    return free_port()


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, rlimits)")
