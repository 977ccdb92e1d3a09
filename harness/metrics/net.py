"""Packets and bytes in a process's network namespace (/proc/PID/net is that namespace's)."""

from __future__ import annotations


def net_counters(pid: int) -> dict[str, int]:
    """TCP segments in/out (/proc/net/snmp) and interface bytes (/proc/net/dev) of pid's netns.

    Segments count the packets the namespace's TCP saw; on loopback (no namespace) this
    includes the generator's side as well as the server's.
    """
    with open(f"/proc/{pid}/net/snmp") as file:
        snmp = file.read().splitlines()
    tcp = [line.split()[1:] for line in snmp if line.startswith("Tcp:")]
    tcp_stats = dict(zip(tcp[0], (int(v) for v in tcp[1]), strict=True))
    rx_bytes = tx_bytes = 0
    with open(f"/proc/{pid}/net/dev") as file:
        dev = file.read().splitlines()[2:]
    for line in dev:
        _, _, fields = line.partition(":")
        values = fields.split()
        rx_bytes += int(values[0])
        tx_bytes += int(values[8])
    return {
        "packets_in": tcp_stats["InSegs"],
        "packets_out": tcp_stats["OutSegs"],
        "bytes_in": rx_bytes,
        "bytes_out": tx_bytes,
    }


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {key: after[key] - before[key] for key in before}
