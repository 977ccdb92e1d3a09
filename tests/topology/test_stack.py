"""Host stacks for per-packet cost: one MSS per packet, one ACK per segment, full 1460-byte
segments, and each host's receive work on its own CPU; a plain topology does none of it."""

from __future__ import annotations

import subprocess

import pytest

from harness.topology import TopologyError, bring_up, load_topology, planned_commands
from tests.conftest import REPO, needs_root

BULK_PAIR = REPO / "topologies/bulk-pair.yaml"
LAN = REPO / "topologies/lan.yaml"

# Receiver: a sink that counts bytes. Sender: 2000 writes of 1460 bytes back to back, so
# that segments arrive in trains (a delayed ACK then covers two or more of them).
SINK = """
import socket, sys
s = socket.create_server((sys.argv[1], 5001)); print("ready", flush=True)
c, _ = s.accept(); n = 0
while (b := c.recv(65536)): n += len(b)
print(n)
"""
SEND = """
import socket, sys
c = socket.create_connection((sys.argv[1], 5001))
print(c.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG), flush=True)
for _ in range(2000):
    c.sendall(b"x" * 1460)
c.close()
"""


def test_bulk_pair_commands_turn_off_offload_delayed_ack_and_timestamps():
    lines = planned_commands(load_topology(BULK_PAIR), "userspace", "wbt1")
    for host in ("server", "generator"):
        assert any(ln.startswith(f"ip netns exec wbt1-{host} sysctl") and
                   "net.ipv4.tcp_timestamps=0" in ln for ln in lines), host
        routes = [ln for ln in lines if ln.startswith(f"ip -n wbt1-{host} route add")]
        assert routes and all(ln.endswith(" quickack 1") for ln in routes), routes
    assert "ip -n wbt1-generator link set dev wbt1-1a gso_max_segs 1" in lines
    assert "ip -n wbt1-server link set dev wbt1-1b gso_max_segs 1" in lines


def test_plain_topology_keeps_the_stack_defaults():
    lines = planned_commands(load_topology(LAN), "userspace", "wbt1")
    assert not [ln for ln in lines if "tcp_timestamps" in ln or "quickack" in ln
                or "gso_max_segs" in ln]


def test_loopback_hosts_refuse_stack_settings(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("name: t\nloopback: true\nhosts:\n"
                    "  server: {role: server, stack: {delayed_ack: false}}\n")
    with pytest.raises(TopologyError, match="share this machine's stack"):
        load_topology(path)


def test_unknown_stack_field_lists_the_allowed_ones(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("name: t\nhosts:\n  server: {role: server, stack: {quick: true}}\n"
                    "  client: {role: hot}\nlinks:\n  l: {a: client, b: server}\n")
    with pytest.raises(TopologyError, match="t.yaml:3: hosts.server.stack.quick: unknown "
                                            "field; allowed here: delayed_ack, "
                                            "receive_on_own_cpu, timestamps"):
        load_topology(path)


def transfer(handle, receiver: str, sender: str) -> dict[str, int]:
    """2000 segments from sender to receiver: the receiver's TCP segments in and out, and
    the sender's MSS."""
    address = handle.address(receiver)
    sink = subprocess.Popen([*handle.exec_prefix(receiver), "python3", "-c", SINK, address],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout.readline().strip() == "ready"
        before = segments(handle, receiver)
        sent = subprocess.run([*handle.exec_prefix(sender), "python3", "-c", SEND, address],
                              capture_output=True, text=True, timeout=60, check=True)
        assert int(sink.stdout.readline()) == 2000 * 1460
    finally:
        sink.kill()
        sink.wait()
    after = segments(handle, receiver)
    return {"in": after[0] - before[0], "out": after[1] - before[1], "mss": int(sent.stdout)}


def segments(handle, host: str) -> tuple[int, int]:
    snmp = subprocess.run([*handle.exec_prefix(host), "cat", "/proc/net/snmp"],
                          capture_output=True, text=True, check=True).stdout
    names, values = [line.split() for line in snmp.splitlines() if line.startswith("Tcp:")]
    tcp = dict(zip(names, values, strict=True))
    return int(tcp["InSegs"]), int(tcp["OutSegs"])


def rps_masks(handle, host: str) -> list[int]:
    out = subprocess.run([*handle.exec_prefix(host), "sh", "-c",
                          "cat /sys/class/net/wb*/queues/rx-*/rps_cpus"],
                         capture_output=True, text=True, check=True).stdout
    return [int(mask.replace(",", ""), 16) for mask in out.split()]


@needs_root
@pytest.mark.slow
def test_bulk_pair_acks_every_full_segment_on_the_receivers_own_cpu(no_leftovers):
    with bring_up(load_topology(BULK_PAIR), "userspace", calibrate=False) as handle:
        no_leftovers.append(handle.prefix)
        handle.steer_receive({"server": 0, "generator": 1})
        assert rps_masks(handle, "server") == [0b01]
        assert rps_masks(handle, "generator") == [0b10]
        counts = transfer(handle, "server", "generator")
        hosts = handle.manifest()["hosts"]
    assert counts["mss"] == 1460  # no timestamp option
    # one MSS per segment (plus the handshake and FIN)
    assert 2000 <= counts["in"] <= 2010, counts
    # quick ACKs: about one ACK per segment, where delayed ACKs send one per two full-sized
    # segments (RFC 5681 4.2); the bound sits between the two. Some ACKs go missing, for a
    # cause not found (no backlog coalescing counted): 1,752 of 2,004 once, 1,940-2,005 in
    # 12 others, so the 0.95 that stood here failed now and then; window updates after the
    # reader's reads add a few (2,005 once), so no upper bound
    assert counts["out"] >= 0.75 * counts["in"], counts
    assert hosts["server"]["receive_cpu"] == 0 and hosts["generator"]["receive_cpu"] == 1


@needs_root
@pytest.mark.slow
def test_a_plain_link_keeps_timestamps_delayed_acks_and_where_receive_work_lands(no_leftovers):
    with bring_up(load_topology(LAN), "userspace", calibrate=False) as handle:
        no_leftovers.append(handle.prefix)
        handle.steer_receive({"server": 0, "client": 1})  # lan's hosts do not ask for it
        assert set(rps_masks(handle, "server")) == {0}
        counts = transfer(handle, "server", "client")
        hosts = handle.manifest()["hosts"]
        routes = subprocess.run([*handle.exec_prefix("server"), "ip", "route"],
                                capture_output=True, text=True, check=True).stdout
    assert counts["mss"] == 1448  # 12 bytes of timestamp option
    assert hosts["server"]["receive_cpu"] is None
    assert routes and "quickack" not in routes  # ACKs left to delay as the kernel does
    # No count of segments or ACKs here: on a plain link GSO is on, so InSegs counts a train
    # of segments as one skb, and the receiver's ACKs follow its reads; 8 transfers gave
    # 1,664-2,005 segments in and 1,521-1,934 out for the same 2,017 wire segments.
