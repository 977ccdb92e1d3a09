"""The userspace backend end to end: delay, loss, rate, jitter and queue limit as configured."""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys

import pytest

import harness.paths
from harness.topology import TopologyError, bring_up, load_topology
from harness.topology.calibrate import CalibrationError, calibrate_link
from tests.conftest import REPO, build, needs_root

pytestmark = [needs_root, pytest.mark.slow]
LAN = REPO / "topologies/lan.yaml"


def up(no_leftovers, overrides: dict[str, str], calibrate: bool = True):
    handle = bring_up(load_topology(LAN, overrides), "userspace", calibrate=calibrate)
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


def test_25ms_each_way_gives_50ms_median_rtt(no_leftovers):
    with up(no_leftovers, {"links.lan.delay_ms": "25"}) as handle:
        assert handle.backend == "userspace"
        cal = handle.calibration["lan"]
        assert cal["ping_rtt_median_ms"] == pytest.approx(50, rel=0.01)
        assert cal["connect_rtt_median_ms"] == pytest.approx(50, rel=0.01)
        # ICMP ping also counts the ping process's wake-ups, hence a little more room.
        assert statistics.median(ping_rtts(handle, 20, "0.05")) == pytest.approx(50.3, abs=0.8)
    forward = handle.emulator_counters["lan"]["a_to_b"]
    assert (forward["sched"], forward["sched_applied"]) == ("fifo:10", True)
    assert forward["busy_poll_us"] == 0  # real-time threads must sleep, never spin


def test_unshaped_link_sleeps_by_default(no_leftovers):
    with up(no_leftovers, {}, calibrate=False) as handle:
        ping(handle, "-c", "3", "-i", "0.2")
    for direction in ("a_to_b", "b_to_a"):
        counters = handle.emulator_counters["lan"][direction]
        assert counters["busy_poll_us"] == 0 and counters["wakeups"] >= 3


def test_busy_polling_link_pauses_on_contended_cpus(no_leftovers):
    with up(no_leftovers, {"links.lan.busy_poll_us": "200"}, calibrate=False) as handle:
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


def test_10_mbit_rate_gives_bulk_tcp_within_5_percent(no_leftovers):
    with up(no_leftovers, {"links.lan.rate_mbit": "10", "links.lan.delay_ms": "5"},
            calibrate=False) as handle:
        # The calibration's own measurement, judged here on rate alone.
        rates = calibrate_link(handle.topology, handle.plan, handle.plan.links[0],
                               "userspace")["rate"]
    for direction in ("a_to_b", "b_to_a"):
        assert abs(rates[direction]["error_pct"]) <= 5, rates
        assert rates[direction]["measured_goodput_mbit"] == pytest.approx(9.65, rel=0.05)


@pytest.mark.parametrize("distribution,sigma", [("normal", 4.0), ("uniform", 4 / 3**0.5)])
def test_jitter_mean_and_spread_within_10_percent(no_leftovers, distribution, sigma):
    overrides = {"links.lan.a_to_b.delay_ms": "20", "links.lan.a_to_b.jitter_ms": "4",
                 "links.lan.a_to_b.jitter_distribution": distribution}
    with up(no_leftovers, overrides, calibrate=False) as handle:
        rtts = ping_rtts(handle, 400, "0.005")
    assert len(rtts) >= 390
    assert statistics.mean(rtts) == pytest.approx(20, rel=0.10)
    assert statistics.stdev(rtts) == pytest.approx(sigma, rel=0.10)


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
        assert manifest["probe"]["chosen"] == ("netem" if netem["ok"] else "userspace")
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
    monkeypatch.setattr(harness.paths, "BIN_DIR", asan_dir)
    overrides = {"links.lan.delay_ms": "2", "links.lan.jitter_ms": "1",
                 "links.lan.loss_pct": "5", "links.lan.rate_mbit": "50"}
    with up(no_leftovers, overrides, calibrate=False) as handle:
        out = ping(handle, "-c", "200", "-i", "0.002", "-s", "1200")
    assert "packets transmitted" in out
    counters = handle.emulator_counters["lan"]
    assert counters["exit_status"] == 0 and counters["stderr"] == "", counters["stderr"]
    assert counters["a_to_b"]["dropped_loss"] > 0


def test_dumbbell_hot_and_cold_links_calibrate(no_leftovers):
    topology = load_topology(REPO / "topologies/dumbbell-wan.yaml", {"links.cold.delay_ms": "10"})
    handle = bring_up(topology, "userspace")
    no_leftovers.append(handle.prefix)
    with handle:
        cal = handle.calibration
        assert cal["cold"]["ping_rtt_median_ms"] == pytest.approx(20, abs=0.2)
        assert cal["hot"]["ping_rtt_median_ms"] < 0.2
        server = handle.address(handle.role_hosts("server")[0])
        for role in ("hot", "cold"):
            client = handle.role_hosts(role)[0]
            # Every client reaches the server at its one address, from any of its own.
            source = handle.addresses(client)[-1]
            argv = [*handle.exec_prefix(client), "ping", "-c", "1", "-W", "1", "-I", source,
                    server]
            assert subprocess.run(argv, capture_output=True).returncode == 0, (role, source)


def test_calibration_refuses_a_link_that_cannot_carry_its_rate(no_leftovers, state_dir):
    # Two packets of queue at 1 Mbit/s: TCP loses in every burst and cannot fill the rate.
    overrides = {"links.lan.a_to_b.rate_mbit": "1", "links.lan.a_to_b.queue_limit": "2"}
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
