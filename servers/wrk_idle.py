"""wb-server under a short wrk load while Python holds idle connections to it: the servers'
benchmark and tests use this to measure a backend at a given number of idle connections.
Benchmark tooling, not part of the product (harness/)."""

from __future__ import annotations

import os
import resource
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import clients
from clients.sources import CONNS_PER_SOURCE, loopback_fallback
from harness.metrics.cpu import TreeSchedstat
from harness.servers import RunningServer

IP_BIND_ADDRESS_NO_PORT = 24  # linux/in.h; socket.IP_BIND_ADDRESS_NO_PORT needs Python 3.12


def raise_fd_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if needed > hard:
        raise RuntimeError(f"{needed} descriptors needed but RLIMIT_NOFILE is {hard}; "
                           f"shard the connections over several processes")
    if needed > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


@contextmanager
def idle_connections(host: str, port: int, count: int) -> Iterator[list[socket.socket]]:
    """Open `count` connections that never send, and close them on the way out."""
    raise_fd_limit(count + 256)
    sources = loopback_fallback(count, [host])  # the generators' rule; [] leaves it to the kernel
    socks: list[socket.socket] = []
    try:
        for i in range(count):
            s = socket.socket()
            socks.append(s)
            if sources:
                s.setsockopt(socket.SOL_IP, IP_BIND_ADDRESS_NO_PORT, 1)
                s.bind((sources[i // CONNS_PER_SOURCE], 0))
            s.connect((host, port))
        yield socks
    finally:
        for s in socks:
            s.close()


def wait_connections(server: RunningServer, count: int) -> dict[str, Any]:
    """The server's stats once it holds exactly `count` connections (it may still be
    accepting new ones or closing old ones)."""
    for _ in range(500):
        stats = server.snapshot()
        if stats["connections_current"] == count:
            return stats
    raise RuntimeError(f"server holds {stats['connections_current']} connections, "
                       f"expected {count}")


def hold_idle(server: RunningServer, socks: list[socket.socket]) -> dict[str, Any]:
    """Confirm from the server's own stats that it holds the idle connections."""
    return wait_connections(server, len(socks))


def run_wrk(address: str, seconds: int, conns: int, cpu: int | None) -> float:
    """wrk (closed loop, one thread) through the clients' driver; its reply rate."""
    spec = clients.LoadSpec(generator="wrk", targets=[address], hot_conns=conns,
                            duration_s=seconds, warmup_s=0, cpu=cpu, threads=1)
    return float(clients.run(spec)["reply_rate_rps"])


@dataclass
class Point:
    backend: str
    idle: int
    reply_rate_rps: float
    cpu_us_per_reply: float
    events_per_dispatch: float
    cpu_source: str = "schedstat"  # nanoseconds; older stored points counted 10 ms ticks


def measure(server: RunningServer, backend: str, idle: int, seconds: int, conns: int,
            wrk_cpu: int | None) -> Point:
    """wrk against a running server holding `idle` idle connections; CPU from schedstat."""
    wait_connections(server, 0)  # the previous point's connections are gone
    with idle_connections(server.host, server.port, idle) as socks:
        before = hold_idle(server, socks)
        server_cpu = TreeSchedstat(server.proc.pid)
        cpu_before, _ = server_cpu.read()
        rate = run_wrk(server.address, seconds, conns, wrk_cpu)
        cpu = server_cpu.read()[0] - cpu_before
        after = server.snapshot()
    replies = after["replies"] - before["replies"]
    calls = after["dispatch_calls"] - before["dispatch_calls"]
    events = after["dispatch_events"] - before["dispatch_events"]
    return Point(backend, idle, rate, cpu / max(replies, 1) * 1e6, events / max(calls, 1))


def cpus() -> tuple[int | None, int | None]:
    """Server and load generator on different CPUs when there are two."""
    allowed = sorted(os.sched_getaffinity(0))
    return (allowed[0], allowed[1]) if len(allowed) >= 2 else (None, None)
