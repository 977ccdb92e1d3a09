"""Which source addresses a generator binds, when no topology says.

A topology plans its hosts' addresses (harness.topology.addressing) and the runner passes
them on. A run without one (`wanbench load`, a generator started by hand) binds what it is
given (a comma list or a CIDR), or on loopback past CONNS_PER_SOURCE connections takes the
fallback: 127.100.0.1 upward, one address per CONNS_PER_SOURCE connections. Loopback
answers from all of 127.0.0.0/8, and each address has its own ephemeral ports.
wb-sclient keeps its own copy in C (main.c, auto_sources); tests/clients/test_sources.py
holds it to this one.
"""

from __future__ import annotations

import ipaddress

CONNS_PER_SOURCE = 5000  # keeps the kernel's port search short
FALLBACK_NET = ipaddress.ip_network("127.100.0.0/16")  # no topology plans from here


def listed(value: list[str] | str) -> list[str]:
    """The addresses a comma list or CIDR names (a CIDR's network and broadcast left out
    below /31, as wb-sclient does)."""
    if isinstance(value, str):
        return [str(h) for h in ipaddress.ip_network(value, strict=False).hosts()]
    return list(value)


def loopback_fallback(total: int, target_hosts: list[str]) -> list[str]:
    """No addresses (the kernel picks) unless every target is on loopback and total
    connections outgrow one address: then one fallback address per CONNS_PER_SOURCE."""
    if total <= CONNS_PER_SOURCE or not all(_is_loopback(h) for h in target_hosts):
        return []
    first = FALLBACK_NET.network_address + 1
    return [str(first + i) for i in range(-(-total // CONNS_PER_SOURCE))]


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def source_addresses(value: list[str] | str | None, target_hosts: list[str],
                     total: int) -> list[str]:
    """The addresses to bind, round robin over connections; [] leaves it to the kernel."""
    return listed(value) if value else loopback_fallback(total, target_hosts)
