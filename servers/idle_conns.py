"""Idle connections held by Python against a running wb-server, confirmed in its stats: the
servers' tests use them to check a backend at a given number of idle connections. Test
tooling, not part of the product (the runner's cold connections come from wb-sclient)."""

from __future__ import annotations

import resource
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from clients.sources import CONNS_PER_SOURCE, loopback_fallback
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
