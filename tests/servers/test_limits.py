"""Descriptor exhaustion, accept strategies and the two RT-signal regimes."""

from __future__ import annotations

import os
import resource
import signal
import socket
import time

import pytest

from harness.metrics.cpu import TreeCpu

from .conftest import StartServer
from .http_client import Client, request

EMFILE_LIMIT = 64
SIGPENDING_LIMIT = 64


def limit(kind: int, value: int):
    def apply() -> None:
        resource.setrlimit(kind, (value, value))

    return apply


def wait_for(server, condition, what: str, tries: int = 500) -> dict:
    for _ in range(tries):
        stats = server.snapshot()
        if condition(stats):
            return stats
    raise AssertionError(f"server never reached: {what}; stats {stats}")


def test_emfile_does_not_spin_and_recovers(serve: StartServer) -> None:
    server = serve(preexec_fn=limit(resource.RLIMIT_NOFILE, EMFILE_LIMIT))
    flood = [socket.create_connection((server.host, server.port)) for _ in range(200)]
    try:
        # Every connect was either accepted and held, or accepted and shed.
        wait_for(server, lambda s: s["connections_accepted"] + s["emfile_events"] >= 200,
                 "all 200 connects handled")
        cpu = TreeCpu([server.proc.pid])
        before = sum(cpu.read())
        time.sleep(2.0)  # the measured window: a spinning server would burn it all
        busy = sum(cpu.read()) - before
        assert busy / 2.0 < 0.20, f"server used {busy / 2.0:.0%} of a CPU while out of fds"
    finally:
        for s in flood:
            s.close()
    wait_for(server, lambda s: s["connections_current"] == 0, "held connections closed")
    with Client(server.host, server.port) as c:
        assert c.get().status == 200


@pytest.mark.parametrize("accept", ["single", "3"])
def test_accept_strategies_serve_a_burst(serve_normal: StartServer, accept: str) -> None:
    server = serve_normal(accept=accept)
    clients = [Client(server.host, server.port) for _ in range(100)]
    try:
        for c in clients:
            c.send(request())
        assert all(c.reply().status == 200 for c in clients)
    finally:
        for c in clients:
            c.close()
    stats = server.snapshot()
    assert stats["accept"] == accept and stats["connections_accepted"] == 100


def answer_all(server, clients: list[Client], pause: bool) -> None:
    """One request on every connection at once; with pause the server is stopped while
    they arrive, so their signals pile up in its queue."""
    if pause:
        os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        for c in clients:
            c.send(request())
    finally:
        if pause:
            os.kill(server.proc.pid, signal.SIGCONT)
    assert all(c.reply().status == 200 for c in clients)


@pytest.mark.parametrize("dispatch", ["rtsig"])
def test_rtsig_queue_overflow_falls_back_to_poll(serve: StartServer) -> None:
    server = serve(preexec_fn=limit(resource.RLIMIT_SIGPENDING, SIGPENDING_LIMIT))
    clients = [Client(server.host, server.port, timeout=10) for _ in range(250)]
    try:
        for pause in (True, False, True):
            answer_all(server, clients, pause)
    finally:
        for c in clients:
            c.close()
    stats = server.snapshot()
    assert stats["requests"] == stats["replies"] == 750
    assert stats["sigio_overflows"] > 0 and stats["fallback_rescans"] > 0


@pytest.mark.parametrize("dispatch", ["rtsig"])
def test_rtsig_low_load_never_overflows(serve: StartServer) -> None:
    server = serve()
    clients = [Client(server.host, server.port) for _ in range(5)]
    try:
        for _ in range(20):
            answer_all(server, clients, pause=False)
    finally:
        for c in clients:
            c.close()
    stats = server.snapshot()
    assert stats["replies"] == 100 and stats["signals_dequeued"] > 0
    assert stats["sigio_overflows"] == 0 and stats["fallback_rescans"] == 0
