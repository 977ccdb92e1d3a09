"""wb-server's reads under edge-triggered dispatch: a new connection's first edge says only
that it is writable (its request comes after), and that edge costs no read that would
return EAGAIN; counted by wb-ktrace, whose read family counts failed calls."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from harness.servers import ServerConfig, running
from tests.conftest import build
from tests.ktrace.conftest import Loader

CONNECTIONS = 25
REQUEST = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.mark.timing
@pytest.mark.parametrize("dispatch", ["epoll", "uring"])
def test_a_writable_edge_alone_costs_no_read(ktrace_bin: Path, tmp_path: Path, dispatch: str):
    """Each connection sends its request 20 ms after it is accepted: one read each that finds
    the request, none that finds nothing (before, one EAGAIN read each)."""
    cfg = ServerConfig(dispatch=dispatch, stats_path=tmp_path / "s.json")
    with running(cfg, build("build/bin/wb-server")) as server:
        loader = Loader(ktrace_bin, "--pid", str(server.proc.pid))
        try:
            loader.start()
            for _ in range(CONNECTIONS):
                with socket.create_connection((server.host, server.port), timeout=10) as s:
                    time.sleep(0.02)  # accepted and registered before its request
                    s.sendall(REQUEST)
                    assert s.recv(4096).startswith(b"HTTP/1.1 200")
            document = loader.stop()
        finally:
            loader.close()
    reads = document["roles"]["server"]["read"]
    assert reads["calls"] >= CONNECTIONS
    assert reads["errors"] <= CONNECTIONS // 10, reads  # EAGAIN: a read that found nothing
