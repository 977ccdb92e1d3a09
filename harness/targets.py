"""The load-target policy: only loopback and the benchmarking range 198.18.0.0/15."""

from __future__ import annotations

import ipaddress
import socket

BENCHMARK_NET = ipaddress.ip_network("198.18.0.0/15")
ALLOW_FLAG = "--allow-any-target"


class TargetRefused(ValueError):
    pass


def resolve(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        info = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise TargetRefused(f"target host {host!r} does not resolve: {exc}") from exc
    return ipaddress.ip_address(info[0][4][0])


def is_allowed(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if addr.is_loopback:
        return True
    return addr.version == 4 and addr in BENCHMARK_NET


def check_target(host: str, allow_any: bool = False) -> str:
    """Return the target's address, or refuse one outside loopback and 198.18.0.0/15."""
    addr = resolve(host)
    if allow_any or is_allowed(addr):
        return str(addr)
    raise TargetRefused(
        f"refusing to send load to {host} ({addr}): wanbench only targets loopback "
        f"(127.0.0.0/8, ::1) and the benchmarking range {BENCHMARK_NET} used by its "
        f"namespace topologies. If you own {addr} and mean it, pass {ALLOW_FLAG}."
    )


def split_host_port(target: str) -> tuple[str, int]:
    """Parse HOST:PORT or [V6]:PORT."""
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"target {target!r} is not HOST:PORT (e.g. 127.0.0.1:8080)")
    return host.strip("[]"), int(port)
