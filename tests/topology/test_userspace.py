"""The userspace backend end to end: delay, loss, rate, jitter and queue limit as configured."""

from __future__ import annotations

import math
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

import clients.paths
from clients.targets import TargetRefused, check_target
from harness.topology import TopologyError, bring_up, load_topology
from harness.topology.backends import AUTO_ORDER
from harness.topology.calibrate import (
    FLOOR_ADDRESSES,
    PROBE_PACKET_BYTES,
    CalibrationError,
    calibrate_link,
    floor_path,
    judge,
    link_path,
    measure,
    probe_interval_s,
)
from harness.topology.ledger import process_start_time
from harness.topology.netns import NETNS_DIR
from tests.conftest import REPO, build, needs_root

pytestmark = [needs_root, pytest.mark.slow]
LAN = REPO / "topologies/lan.yaml"
PING_ROUNDING_MS = 0.05  # ping prints times of 10-100 ms to a tenth of a millisecond
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def up(no_leftovers, overrides: dict[str, str], calibrate: bool = True,
       backend: str = "userspace"):
    handle = bring_up(load_topology(LAN, overrides), backend, calibrate=calibrate)
    no_leftovers.append(handle.prefix)
    return handle


def ping(handle, *args: str) -> str:
    argv = [*handle.exec_prefix("client"), "ping", "-n", "-q", *args,
            handle.address("server")]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout


def ping_rtts(handle, count: int, interval: str) -> list[float]:
    argv = [*handle.exec_prefix("client"), "ping", "-n", "-c", str(count), "-i", interval,
            handle.address("server")]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout
    return [float(x) for x in re.findall(r"time=([\d.]+) ms", out)]


def assert_on_time(counters: dict) -> None:
    """The emulator's promise: no packet released later than its resolution by its own doing.
    Time the machine kept its threads off the CPU is counted apart (stall_us_max)."""
    for direction in ("a_to_b", "b_to_a"):
        c = counters[direction]
        # what a failure needs said first (the whole dict is cut short in the report)
        said = (direction, {key: c[key] for key in (
            "forwarded", "late_over_resolution", "own_late_over_resolution", "own_late_us_max",
            "stall_us_max", "late_us_max", "resolution_us") if key in c})
        assert c["own_late_over_resolution"] == 0, said
        assert c["own_late_us_max"] <= c["resolution_us"], said
        assert sum(c["late_log2_us"]) == c["forwarded"] + c["write_errors"], (direction, c)


def assert_calibrated_within_bounds(result: dict) -> None:
    """What calibration accepted: median >= configured - tolerance, and the fastest probe
    (the median on a jittering link) <= configured + floor + tolerance, with the floor
    measured on the same path unshaped and recorded."""
    configured, tolerance = result["configured_rtt_ms"], result["rtt_tolerance_ms"]
    upper = "median" if result["upper_bound_on"] == "median" else "fastest"
    for kind in ("ping", "connect"):
        floor = result["floor"][f"{kind}_rtt_median_ms"]
        assert 0 <= floor < 5, result["floor"]
        assert result[f"{kind}_rtt_median_ms"] >= configured - tolerance, (kind, result)
        assert result[f"{kind}_rtt_{upper}_ms"] <= configured + floor + tolerance, (kind, result)


@pytest.mark.timing
@pytest.mark.parametrize("backend,io", [("userspace", "tun"), ("xdp", "xdp")])
def test_25ms_each_way_gives_50ms_median_rtt(no_leftovers, request, backend, io):
    if io == "xdp":
        request.getfixturevalue("af_xdp")
    with up(no_leftovers, {"links.lan.delay_ms": "25"}, backend=backend) as handle:
        assert handle.backend == backend
        cal = handle.calibration["lan"]
        assert cal["configured_rtt_ms"] == 50
        assert_calibrated_within_bounds(cal)  # within 1 % (0.5 ms) plus the floor
        assert cal["floor"]["path"].startswith(f"wb-linkem fifo:10, unshaped, {io} I/O")
        rtts = ping_rtts(handle, 20, "0.05")
    # ICMP ping: never below the configured delay; above it by the floor and ping's own
    # wake-ups, within the emulator's resolution.
    assert min(rtts) >= 50 - PING_ROUNDING_MS
    resolution_ms = handle.emulator_counters["lan"]["a_to_b"]["resolution_us"] / 1000
    assert statistics.median(rtts) <= 50 + cal["floor"]["ping_rtt_median_ms"] + resolution_ms
    assert_on_time(handle.emulator_counters["lan"])
    forward = handle.emulator_counters["lan"]["a_to_b"]
    assert (forward["sched"], forward["sched_applied"], forward["io"]) == ("fifo:10", True, io)
    assert forward["busy_poll_us"] == 0  # real-time threads must sleep, never spin


def test_unshaped_link_is_a_veth_pair_without_the_emulator(no_leftovers):
    with up(no_leftovers, {}, calibrate=False) as handle:
        out = ping(handle, "-c", "3", "-i", "0.2")
        link = subprocess.run(["ip", "-n", handle.netns("client"), "-d", "link", "show",
                               handle.plan.links[0].a_dev], capture_output=True, text=True)
        assert handle.manifest()["links"]["lan"]["wiring"] == "veth"
    assert " 0% packet loss" in out
    assert "veth" in link.stdout, link.stdout
    assert "lan" not in handle.emulator_counters


def test_emulated_unshaped_link_sleeps_by_default(no_leftovers):
    with up(no_leftovers, {"links.lan.emulate_unshaped": "true"}, calibrate=False) as handle:
        assert handle.manifest()["links"]["lan"]["wiring"] == "wb-linkem"
        ping(handle, "-c", "3", "-i", "0.2")
    for direction in ("a_to_b", "b_to_a"):
        counters = handle.emulator_counters["lan"][direction]
        assert counters["busy_poll_us"] == 0 and counters["wakeups"] >= 3


@pytest.mark.parametrize("backend,overrides", [
    ("userspace", {}), ("userspace", {"links.lan.emulate_unshaped": "true"}),
    ("xdp", {"links.lan.emulate_unshaped": "true"})], ids=["veth", "wb-linkem", "wb-linkem-xdp"])
def test_the_target_rule_lets_each_host_load_its_neighbour_and_nobody_else(no_leftovers, request,
                                                                          backend, overrides):
    """Across a veth pair, wb-linkem's TUNs or the veth pairs wb-linkem joins over AF_XDP,
    the client reaches the server's address through the link; this test's own namespace,
    which holds no link to either, is refused."""
    if backend == "xdp":
        request.getfixturevalue("af_xdp")
    with up(no_leftovers, overrides, calibrate=False, backend=backend) as handle:
        server, client = handle.address("server"), handle.address("client")
        assert check_target(server, sender=NETNS_DIR / handle.netns("client")) == server
        assert check_target(client, sender=NETNS_DIR / handle.netns("server")) == client
        with pytest.raises(TargetRefused, match="default route|no route"):
            check_target(server)


def test_busy_polling_link_pauses_on_contended_cpus(no_leftovers):
    overrides = {"links.lan.busy_poll_us": "200", "links.lan.emulate_unshaped": "true"}
    with up(no_leftovers, overrides, calibrate=False) as handle:
        # More CPU-bound tasks than CPUs: busy-polling would take their time, so it pauses.
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(os.cpu_count() + 1)]
        try:
            out = ping(handle, "-f", "-c", "20000", "-W", "0.05")
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
    assert "20000 packets transmitted" in out
    counters = handle.emulator_counters["lan"]
    for direction in ("a_to_b", "b_to_a"):
        c = counters[direction]
        assert (c["sched"], c["sched_applied"]) == ("batch", True)
        assert c["busy_poll_us"] == 200
        assert c["forwarded"] == c["received"] >= 19000
    assert counters["a_to_b"]["busy_poll_pauses"] + counters["b_to_a"]["busy_poll_pauses"] > 0


def test_busy_polling_is_refused_on_a_shaped_link():
    with pytest.raises(TopologyError, match="busy_poll_us applies to unshaped links only"):
        load_topology(LAN, {"links.lan.delay_ms": "5", "links.lan.busy_poll_us": "200"})


def test_busy_polling_needs_the_emulator_on_its_unshaped_link():
    with pytest.raises(TopologyError, match="unless it sets emulate_unshaped: true"):
        load_topology(LAN, {"links.lan.busy_poll_us": "200"})


def test_busy_polling_is_refused_for_real_time_threads(linkem):
    argv = [str(linkem), "--a-netns", "/x", "--a-dev", "a", "--b-netns", "/y", "--b-dev", "b",
            "--busy-poll-us", "50", "--sched", "fifo:10"]
    out = subprocess.run(argv, capture_output=True, text=True)
    assert out.returncode == 2 and "--busy-poll-us" in out.stderr


def test_one_percent_loss_over_20000_packets(no_leftovers):
    with up(no_leftovers, {"links.lan.a_to_b.loss_pct": "1"}, calibrate=False) as handle:
        out = ping(handle, "-f", "-c", "20000", "-W", "0.05")
    loss = float(re.search(r"([\d.]+)% packet loss", out).group(1))
    assert loss == pytest.approx(1.0, abs=0.5), out
    counters = handle.emulator_counters["lan"]["a_to_b"]
    assert counters["dropped_loss"] + counters["forwarded"] == counters["received"]
    assert counters["dropped_loss"] / counters["received"] == pytest.approx(0.01, abs=0.005)


SINK = """
import socket, sys
s = socket.socket()
s.bind((sys.argv[1], 0))
s.listen()
print(s.getsockname()[1], flush=True)
c, _ = s.accept()
n = 0
while data := c.recv(1 << 20):
    n += len(data)
print(n)
"""
SOURCE = """
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
chunk = b"x" * (1 << 20)
for _ in range(int(sys.argv[3])):
    s.sendall(chunk)
s.close()
"""
TCP_IP_HEADER_BYTES = 20 + 32  # IPv4 and TCP with timestamps (lan.yaml's stacks keep them)


def bulk(handle, mbytes: int) -> int:
    """One TCP stream of mbytes MiB from client to server; the bytes the server received."""
    server = handle.address("server")
    sink = subprocess.Popen([*handle.exec_prefix("server"), "python3", "-c", SINK, server],
                            stdout=subprocess.PIPE, text=True)
    port = sink.stdout.readline().strip()
    subprocess.run([*handle.exec_prefix("client"), "python3", "-c", SOURCE, server, port,
                    str(mbytes)], check=True, timeout=120)
    received = int(sink.stdout.readline())
    assert sink.wait(timeout=10) == 0
    return received


def test_bulk_tcp_crosses_as_gso_segments_counted_as_wire_packets(no_leftovers):
    with up(no_leftovers, {"links.lan.emulate_unshaped": "true"}, calibrate=False) as handle:
        received = bulk(handle, 50)
    assert received == 50 << 20
    data = handle.emulator_counters["lan"]["a_to_b"]
    assert data["offload"] == "csum,tso"
    assert data["forwarded"] == data["received"] and data["dropped_queue"] == 0
    # most of the stream crossed in segments of many packets: a read and a write for each
    assert data["gso_packets"] >= 0.9 * received / 1448
    assert data["gso_packets"] / data["gso_reads"] >= 8
    # each wire packet is charged its own headers, as the rate limiter sees them: the bytes
    # beyond the payload are one IP and TCP header per packet (not per segment)
    overhead = data["forwarded_bytes"] - received
    assert overhead == pytest.approx(data["forwarded"] * TCP_IP_HEADER_BYTES, rel=0.02)


def test_without_segmentation_offload_every_read_is_one_packet(no_leftovers):
    overrides = {"links.lan.emulate_unshaped": "true", "links.lan.segmentation_offload": "false"}
    with up(no_leftovers, overrides, calibrate=False) as handle:
        received = bulk(handle, 10)
    assert received == 10 << 20
    for direction in ("a_to_b", "b_to_a"):
        c = handle.emulator_counters["lan"][direction]
        assert (c["offload"], c["gso_reads"]) == ("none", 0), direction
        assert c["reads"] == c["received"], direction


def test_ten_percent_loss_on_bulk_tcp_drops_wire_packets_not_segments(no_leftovers):
    with up(no_leftovers, {"links.lan.a_to_b.loss_pct": "10"}, calibrate=False) as handle:
        received = bulk(handle, 20)
    assert received == 20 << 20
    counters = handle.emulator_counters["lan"]
    lossy, clean = counters["a_to_b"], counters["b_to_a"]
    # the lossy direction's TUN takes no TSO: the kernel segments, every draw is a packet's
    assert (lossy["offload"], lossy["gso_reads"]) == ("csum", 0)
    assert lossy["reads"] == lossy["received"] >= 15000
    assert lossy["dropped_loss"] / lossy["received"] == pytest.approx(0.10, abs=0.01)
    assert clean["offload"] == "csum,tso" and clean["dropped_loss"] == 0


@pytest.mark.timing
def test_10_mbit_rate_gives_bulk_tcp_within_5_percent(no_leftovers):
    with up(no_leftovers, {"links.lan.rate_mbit": "10", "links.lan.delay_ms": "5"},
            calibrate=False) as handle:
        # The calibration's own measurement, judged here on rate alone.
        rates = calibrate_link(handle.topology, handle.plan, handle.plan.links[0],
                               "userspace")["rate"]
        counters = handle.emulator_counters
    for direction in ("a_to_b", "b_to_a"):
        assert abs(rates[direction]["error_pct"]) <= 5, rates
        assert rates[direction]["measured_goodput_mbit"] == pytest.approx(9.65, rel=0.05)
        # the rate was charged for GSO segments' wire packets, not for single packets only
        assert counters["lan"][direction]["gso_reads"] > 0, counters["lan"][direction]


@pytest.mark.timing
def test_probes_in_flight_together_are_paced_past_each_others_packets_at_a_slow_rate(
        no_leftovers):
    """Connect probes through a 0.2 Mbit/s link (a SYN takes 2.4 ms there, more than a busy
    machine takes to start the next): started all at once, each SYN waits behind the ones
    before it, and the median RTT, less the floor, reads more than a packet's time high;
    paced as calibration paces them, the median probe waits behind no other's packet."""
    rate_mbit = 0.2
    packet_ms = PROBE_PACKET_BYTES * 8 / (rate_mbit * 1e3)
    with up(no_leftovers, {"links.lan.rate_mbit": str(rate_mbit), "links.lan.delay_ms": "25"},
            calibrate=False) as handle:
        link = handle.plan.links[0]
        spec = handle.topology.links[link.name]
        errors = []
        with floor_path(spec, "userspace") as (floor, _):
            for interval_s in (0.0, probe_interval_s(spec)):
                raw = measure(link_path(handle.plan, link), floor, interval_s=interval_s)
                judged = judge(link.name, spec, "userspace", raw)
                errors.append(judged["connect_rtt_error_ms"]
                              - statistics.median(raw["floor"]["connect_ms"]))
    together, paced = errors
    assert together > packet_ms > paced, (errors, packet_ms)


def draw_quantile(delay_ms: float, jitter_ms: float, distribution: str,
                  p: float) -> tuple[float, float]:
    """Quantile p of delay + jitter, and the density there (the quantile's standard error
    over n draws is sqrt(p (1 - p) / n) / density)."""
    if distribution == "uniform":
        return delay_ms - jitter_ms + 2 * jitter_ms * p, 1 / (2 * jitter_ms)
    z = statistics.NormalDist().inv_cdf(p)
    return delay_ms + jitter_ms * z, statistics.NormalDist().pdf(z) / jitter_ms


def assert_quantiles(rtts: list[float], delay_ms: float, jitter_ms: float, distribution: str,
                     slack_ms: float) -> None:
    """Each quantile within 4 standard errors of the draw's, plus slack_ms above it: what the
    machine adds (the floor, ping's own timing, a stall now and then)."""
    cuts = statistics.quantiles(rtts, n=100, method="inclusive")
    for p in QUANTILES:
        expected, density = draw_quantile(delay_ms, jitter_ms, distribution, p)
        error = 4 * math.sqrt(p * (1 - p) / len(rtts)) / density
        measured = cuts[round(100 * p) - 1]
        assert expected - error <= measured <= expected + error + slack_ms, (
            f"p{100 * p:g}: {measured:.3f} ms, expected {expected:.3f} ms "
            f"-{error:.3f}/+{error + slack_ms:.3f}")


@pytest.mark.timing
@pytest.mark.parametrize("distribution", ["normal", "uniform"])
def test_jitter_quantiles_follow_the_draw_and_no_release_is_late(no_leftovers, distribution):
    delay_ms, jitter_ms = 20.0, 4.0
    overrides = {"links.lan.a_to_b.delay_ms": "20", "links.lan.a_to_b.jitter_ms": "4",
                 "links.lan.a_to_b.jitter_distribution": distribution}
    with up(no_leftovers, overrides, calibrate=False) as handle:
        rtts = ping_rtts(handle, 400, "0.005")
    counters = handle.emulator_counters["lan"]
    assert len(rtts) >= 390
    assert_on_time(counters)
    # jitter reorders packet by packet: no TSO on the jittering direction's TUN
    assert (counters["a_to_b"]["offload"], counters["b_to_a"]["offload"]) == ("csum", "csum,tso")
    resolution_ms = counters["a_to_b"]["resolution_us"] / 1000
    assert_quantiles(rtts, delay_ms, jitter_ms, distribution, slack_ms=resolution_ms)
    if distribution == "uniform":  # bounded: nothing ever leaves before delay - jitter
        assert min(rtts) >= delay_ms - jitter_ms - PING_ROUNDING_MS


def test_queue_overflow_drops_are_counted(no_leftovers):
    overrides = {"links.lan.rate_mbit": "1", "links.lan.queue_limit": "20"}
    with up(no_leftovers, overrides, calibrate=False) as handle:
        # 300 datagrams of 1000 B at once into a 1 Mbit/s link holding 20 packets.
        sender = ("import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                  f"[s.sendto(b'x' * 1000, ('{handle.address('server')}', 9)) "
                  "for _ in range(300)]")
        subprocess.run([*handle.exec_prefix("client"), "python3", "-c", sender], check=True)
    counters = handle.emulator_counters["lan"]["a_to_b"]
    assert counters["dropped_queue"] > 0
    assert counters["max_queue_depth"] == 20
    assert (counters["forwarded"] + counters["dropped_queue"] + counters["held_at_exit"]
            == counters["received"])


def test_handle_reports_hosts_roles_and_manifest(no_leftovers):
    handle = bring_up(load_topology(LAN), "auto", calibrate=False)
    no_leftovers.append(handle.prefix)
    with handle:
        assert handle.role_hosts("server") == ["server"]
        assert handle.role_hosts("hot") == ["client"]
        assert handle.exec_prefix("server") == ["ip", "netns", "exec", f"{handle.prefix}-server"]
        manifest = handle.manifest()
        netem = manifest["probe"]["netem"]
        # the first of netem, AF_XDP and TUN devices that works here
        assert manifest["probe"]["chosen"] == next(
            backend.name for backend in AUTO_ORDER if manifest["probe"][backend.name]["ok"])
        if not netem["ok"]:
            assert netem["error"] in manifest["probe"]["reason"]
        assert manifest["links"]["lan"]["a_to_b"]["queue_limit_packets"] == 1000
        with pytest.raises(TopologyError, match="unknown host 'nope'"):
            handle.address("nope")
    handle.teardown()  # idempotent


def test_same_prefix_twice_is_refused(no_leftovers):
    with up(no_leftovers, {}, calibrate=False) as handle:
        with pytest.raises(TopologyError, match=f"run prefix {handle.prefix} is in use"):
            bring_up(load_topology(LAN), "userspace", run_prefix=handle.prefix, calibrate=False)
        # The refused run must not have touched the live one.
        assert ping(handle, "-c", "1", "-W", "1").count(" 0% packet loss") == 1


def test_sanitizer_build_forwards_and_exits_clean(no_leftovers, monkeypatch):
    asan_dir = build("build/asan/bin/wb-linkem").parent
    monkeypatch.setattr(clients.paths, "BIN_DIR", asan_dir)
    overrides = {"links.lan.delay_ms": "2", "links.lan.jitter_ms": "1",
                 "links.lan.loss_pct": "5", "links.lan.rate_mbit": "50"}
    with up(no_leftovers, overrides, calibrate=False) as handle:
        out = ping(handle, "-c", "200", "-i", "0.002", "-s", "1200")
    assert "packets transmitted" in out
    counters = handle.emulator_counters["lan"]
    assert counters["exit_status"] == 0 and counters["stderr"] == "", counters["stderr"]
    assert counters["a_to_b"]["dropped_loss"] > 0


def test_sanitizer_build_forwards_gso_segments_and_exits_clean(no_leftovers, monkeypatch):
    asan_dir = build("build/asan/bin/wb-linkem").parent
    monkeypatch.setattr(clients.paths, "BIN_DIR", asan_dir)
    overrides = {"links.lan.rate_mbit": "200", "links.lan.queue_limit": "100"}
    with up(no_leftovers, overrides, calibrate=False) as handle:
        received = bulk(handle, 10)
    assert received == 10 << 20
    counters = handle.emulator_counters["lan"]
    assert counters["exit_status"] == 0 and counters["stderr"] == "", counters["stderr"]
    assert counters["a_to_b"]["gso_reads"] > 0


@pytest.mark.timing
def test_dumbbell_hot_and_cold_links_calibrate(no_leftovers):
    topology = load_topology(REPO / "topologies/dumbbell-wan.yaml", {"links.cold.delay_ms": "10"})
    for _ in range(2):  # a correct topology is accepted every time, not by luck
        handle = bring_up(topology, "userspace")
        no_leftovers.append(handle.prefix)
        with handle:
            cal = handle.manifest()["calibration"]
            assert (cal["hot"]["configured_rtt_ms"], cal["cold"]["configured_rtt_ms"]) == (0, 20)
            # The unshaped hot link is veth, and so is its floor; the cold link's floor is
            # the emulator with real-time threads, as the link runs it.
            for name, floor in (("hot", "veth pair"), ("cold", "wb-linkem fifo:10, unshaped")):
                assert_calibrated_within_bounds(cal[name])
                assert cal[name]["floor"]["path"].startswith(floor)
            server = handle.address(handle.role_hosts("server")[0])
            for role in ("hot", "cold"):
                client = handle.role_hosts(role)[0]
                # Every client reaches the server at its one address, from any of its own.
                source = handle.addresses(client)[-1]
                argv = [*handle.exec_prefix(client), "ping", "-c", "1", "-W", "1", "-I",
                        source, server]
                assert subprocess.run(argv, capture_output=True).returncode == 0, (role, source)


@pytest.mark.timing
@pytest.mark.parametrize("actual_ms,judged_ms,verdict", [
    ("5", "10", "delays less than configured"),
    ("10", "5", "beyond its configuration and the floor"),
], ids=["too-little-delay", "too-much-delay"])
def test_calibration_refuses_a_link_whose_delay_is_wrong(no_leftovers, actual_ms, judged_ms,
                                                         verdict):
    # A live link delaying actual_ms each way, judged as if configured with judged_ms.
    with up(no_leftovers, {"links.lan.delay_ms": actual_ms}, calibrate=False) as handle:
        claimed = load_topology(LAN, {"links.lan.delay_ms": judged_ms})
        result = calibrate_link(claimed, handle.plan, handle.plan.links[0], "userspace")
    assert len(result["problems"]) == 2, result
    for kind, problem in zip(("ping", "connect"), result["problems"], strict=True):
        assert problem.startswith(f"link lan: {kind} RTT median ")
        assert f"vs configured {2 * float(judged_ms):.3f} ms (fastest " in problem
        assert verdict in problem and "fix:" in problem


@pytest.mark.timing
def test_calibration_refuses_a_link_that_cannot_carry_its_rate(no_leftovers, state_dir):
    # One packet of queue at 1 Mbit/s: TCP loses in every burst and carries 0.13-0.25 Mbit/s
    # (4 bring-ups here). Two packets, as this test had, carried the rate within 5 % in 5 of 20
    # runs once the calibration stopped timing the buffered tail that the sender left (its
    # losses then waited out retransmission timeouts): that link does not always deserve it.
    overrides = {"links.lan.a_to_b.rate_mbit": "1", "links.lan.a_to_b.queue_limit": "1"}
    with pytest.raises(CalibrationError) as err:
        bring_up(load_topology(LAN, overrides), "userspace")
    assert "lan a_to_b: TCP goodput" in str(err.value) and "for 1 Mbit/s" in str(err.value)
    assert "emulator release lateness" in str(err.value)
    assert "first_attempt" in err.value.results["lan"]  # measured twice before refusing
    no_leftovers.extend(p.stem for p in state_dir.glob("wb*.json"))


def test_namespaces_reuse_time_wait_ports(no_leftovers):
    # a connection per request at thousands per second must not run out of ports
    with up(no_leftovers, {}, calibrate=False) as handle:
        out = subprocess.run([*handle.exec_prefix("client"), "sysctl", "-n",
                              "net.ipv4.tcp_tw_reuse", "net.ipv4.ip_local_port_range"],
                             capture_output=True, text=True, check=True).stdout
    assert out.split() == ["1", "1024", "65535"]


# A bring-up whose calibration runs long enough to be caught: bulk TCP each way at 20 Mbit/s.
CALIBRATING = """
import sys
from harness.topology import bring_up, load_topology
bring_up(load_topology(sys.argv[1], {"links.lan.rate_mbit": "20"}), "userspace")
"""


def descendants(pid: int) -> dict[int, str]:
    """pid's descendants now: pid -> command line."""
    parents, commands = {}, {}
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            commands[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except (ValueError, OSError):
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = {}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, ppid in parents.items():
            if ppid == parent and child not in found:
                found[child] = commands[child].decode(errors="replace")
                frontier.append(child)
    return found


def alive(pid: int, start_time: int | None) -> bool:
    """Still the same process, and not a zombie (a dead one holds no namespace)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z" and process_start_time(pid) == start_time


@pytest.mark.timing
@pytest.mark.parametrize("stage,marker", [("floor", f"serve --bind {FLOOR_ADDRESSES[1]}"),
                                          ("link", "serve --bind 198.18.")],
                         ids=["measuring-floor", "measuring-link"])
def test_calibration_helpers_die_with_a_killed_runner(no_leftovers, state_dir, stage, marker):
    runner = subprocess.Popen([sys.executable, "-c", CALIBRATING, str(LAN)], cwd=REPO)
    try:
        deadline, helpers = time.monotonic() + 30, {}
        while time.monotonic() < deadline and not any(marker in c for c in helpers.values()):
            time.sleep(0.005)
            helpers = descendants(runner.pid)
        assert any(marker in c for c in helpers.values()), f"no {stage} agent: {helpers}"
    finally:
        runner.kill()
        runner.wait()
    # The topology's own emulator outlives its owner by design: `topo clean` stops it.
    helpers = {pid: (cmd, process_start_time(pid)) for pid, cmd in helpers.items()
               if "/run/netns/" not in cmd}
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and any(alive(p, t) for p, (_, t) in helpers.items()):
        time.sleep(0.05)
    left = [cmd for pid, (cmd, t) in helpers.items() if alive(pid, t)]
    no_leftovers.extend(p.stem for p in state_dir.glob("wb*.json"))
    clean = subprocess.run([sys.executable, "-m", "harness.cli", "topo", "clean"],
                           capture_output=True, text=True, cwd=REPO, timeout=60)
    assert clean.returncode == 0, clean.stderr
    assert left == [], f"still running 2 s after the runner's SIGKILL: {left}"
