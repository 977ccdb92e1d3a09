"""Generated command lines: netem for every shipped topology, the emulator's, and --dry-run."""

from __future__ import annotations

import ipaddress
import re
import subprocess
import sys

import pytest

from harness.topology import load_topology, planned_commands
from harness.topology.backend_probe import link_backend_here
from harness.topology.calibrate import expected_goodput_bps, judge, rtt_tolerance_ms
from tests.conftest import REPO, needs_root
from tests.topology.test_model import SHIPPED

NAMESPACED = [p for p in SHIPPED if not load_topology(p).loopback]


def addresses_in(lines: list[str]) -> list[str]:
    return re.findall(r"\b\d+\.\d+\.\d+\.\d+\b", " ".join(lines))


@pytest.mark.parametrize("path", NAMESPACED, ids=lambda p: p.name)
def test_netem_commands_for_every_shipped_topology(path):
    topology = load_topology(path)
    lines = planned_commands(topology, "netem", "wbt1")
    for name in topology.hosts:
        assert f"ip netns add wbt1-{name}" in lines
    veths = [ln for ln in lines if " type veth " in ln]
    assert len(veths) == len(topology.links)
    for k, (name, link) in enumerate(topology.links.items(), start=1):
        assert (f"ip link add wbt1-{k}a netns wbt1-{link.a} type veth peer name wbt1-{k}b "
                f"netns wbt1-{link.b}") in lines
        qdiscs = [ln for ln in lines if ln.startswith("tc ") and f" dev wbt1-{k}" in ln]
        assert len(qdiscs) == (0 if link.direction("a_to_b").is_plain else 2), name
        for line in qdiscs:
            limit = int(re.search(r" limit (\d+)", line).group(1))
            assert limit >= 1000  # sized from the BDP, never tc's silent default
    for addr in addresses_in(lines):
        assert ipaddress.ip_address(addr) in ipaddress.ip_network("198.18.0.0/15"), addr
    for dev in re.findall(r"\bdev (\S+)", " ".join(lines)):
        assert len(dev) <= 15


def test_dumbbell_netem_lines_exactly():
    topology = load_topology(REPO / "topologies/dumbbell-wan.yaml",
                             {"links.cold.jitter_ms": "5", "links.cold.jitter_distribution":
                              "normal", "links.cold.loss_pct": "1", "links.cold.rate_mbit": "1000",
                              "links.cold.b_to_a.delay_ms": "30"})
    lines = planned_commands(topology, "netem", "wbt1")
    # RTT with jitter 50+5+30+5 = 90 ms at 1 Gbit/s: 7500 packets, x1.5 = 11250.
    assert ("tc -n wbt1-cold qdisc add dev wbt1-2a root netem limit 11250 delay 50ms 5ms "
            "distribution normal loss 1% rate 1000000kbit") in lines
    assert ("tc -n wbt1-server qdisc add dev wbt1-2b root netem limit 11250 delay 30ms 5ms "
            "distribution normal loss 1% rate 1000000kbit") in lines
    assert "ip -n wbt1-cold route add 198.19.1.0/24 via 198.18.2.2 src 198.19.3.1" in lines
    assert "ip -n wbt1-server route add 198.19.3.0/24 via 198.18.2.1 src 198.19.1.1" in lines
    assert not any(ln.startswith("tc ") and "wbt1-1" in ln for ln in lines)  # hot: unshaped
    assert "ip -n wbt1-server link set dev wbt1-2b gso_max_segs 1" in lines


def test_userspace_commands_emulate_shaped_links_and_join_unshaped_ones_by_veth(linkem):
    topology = load_topology(REPO / "topologies/dumbbell-wan.yaml", {"links.cold.loss_pct": "1"})
    lines = planned_commands(topology, "userspace", "wbt1")
    emulators = [ln for ln in lines if ln.endswith(" &")]
    assert len(emulators) == 1
    assert "--a-netns /run/netns/wbt1-cold --a-dev wbt1-2a" in emulators[0]
    assert ("--ab delay_us=50000,jitter_us=0,dist=uniform,loss=0.01,rate_bps=0,limit=125000"
            in emulators[0])
    assert not any(ln.startswith("tc ") for ln in lines)
    assert "--sched fifo:10" in emulators[0]  # real-time: packets wait for a release time
    assert "ip -n wbt1-server link set dev wbt1-2b txqueuelen 10000" in lines
    # The hot link shapes nothing: a veth pair, no emulator's cost on the server's CPUs.
    assert ("ip link add wbt1-1a netns wbt1-hot type veth peer name wbt1-1b "
            "netns wbt1-server") in lines
    assert "ip -n wbt1-server link set dev wbt1-1b txqueuelen 10000" not in lines


def test_userspace_keeps_the_emulator_on_an_unshaped_link_when_asked(linkem):
    topology = load_topology(REPO / "topologies/dumbbell-wan.yaml",
                             {"links.hot.emulate_unshaped": "true"})
    emulators = [ln for ln in planned_commands(topology, "userspace", "wbt1")
                 if ln.endswith(" &")]
    assert len(emulators) == 2
    # Batch scheduling where nothing waits for a release time.
    assert "--sched batch " in emulators[0] and "--sched fifo:10" in emulators[1]
    # segments cross whole unless the link asks for one MSS per packet
    assert all("--offload on" in e for e in emulators)


def test_userspace_link_without_segmentation_offload_turns_the_emulators_off(linkem):
    topology = load_topology(REPO / "topologies/lan.yaml",
                             {"links.lan.emulate_unshaped": "true",
                              "links.lan.segmentation_offload": "false"})
    emulators = [ln for ln in planned_commands(topology, "userspace", "wbt1")
                 if ln.endswith(" &")]
    assert len(emulators) == 1 and "--offload off" in emulators[0]


def test_xdp_commands_cross_two_veth_pairs_and_need_no_arp(linkem):
    topology = load_topology(REPO / "topologies/lan.yaml", {"links.lan.delay_ms": "5"})
    lines = planned_commands(topology, "xdp", "wbt1")
    (emulator,) = [ln for ln in lines if ln.endswith(" &")]
    pairs = [  # each host's device, and its far end of the same name in the other host's
        "ip -n wbt1-client link add wbt1-1a address 02:77:62:00:01:0a type veth peer name "
        "wbt1-1a netns wbt1-server", "ip -n wbt1-server link set wbt1-1a up",
        "ip -n wbt1-server link add wbt1-1b address 02:77:62:00:01:0b type veth peer name "
        "wbt1-1b netns wbt1-client", "ip -n wbt1-client link set wbt1-1b up"]
    neighbours = [  # each host's peer at its MAC, with no ARP across the emulator
        "ip -n wbt1-client neigh replace 198.18.1.2 lladdr 02:77:62:00:01:0b dev wbt1-1a "
        "nud permanent", "ip -n wbt1-server neigh replace 198.18.1.1 lladdr "
        "02:77:62:00:01:0a dev wbt1-1b nud permanent"]
    # the pairs exist before the emulator attaches to them; the neighbours after addresses
    assert [ln for ln in lines if ln in pairs + neighbours + [emulator]] == [
        *pairs, emulator, *neighbours]
    assert emulator.startswith(f"{linkem} --a-netns /run/netns/wbt1-client --a-dev wbt1-1a "
                               "--b-netns /run/netns/wbt1-server --b-dev wbt1-1b ")
    assert "--io xdp --sched fifo:10" in emulator
    assert not any("txqueuelen" in ln or ln.startswith("tc ") for ln in lines)


def test_tun_commands_name_their_io_back_end(linkem):
    topology = load_topology(REPO / "topologies/lan.yaml", {"links.lan.delay_ms": "5"})
    (emulator,) = [ln for ln in planned_commands(topology, "userspace", "wbt1")
                   if ln.endswith(" &")]
    assert "--io tun " in emulator


def dry_run(backend: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", "topo", "up",
                           str(REPO / "topologies/lan.yaml"), "--dry-run", "--backend", backend,
                           "--prefix", "wbt2", "--set", "links.lan.delay_ms=7"],
                          capture_output=True, text=True, cwd=REPO)


@needs_root
def test_dry_run_prints_the_planned_commands():
    out = dry_run("userspace")
    assert out.returncode == 0, out.stderr
    topology = load_topology(REPO / "topologies/lan.yaml", {"links.lan.delay_ms": "7"})
    assert out.stdout.splitlines()[1:] == planned_commands(topology, "userspace", "wbt2")


@needs_root
def test_dry_run_answers_as_topo_up_would():
    """A requested backend is probed as `topo up` probes it: netem's commands where netem
    works, else the refusal `topo up` would give (no plan for a backend that cannot run)."""
    out = dry_run("netem")
    if link_backend_here()[0] == "netem":
        assert out.returncode == 0, out.stderr
        # 10 Gbit/s line rate assumed x 14 ms (7 each way) = 11667 packets, x1.5 = 17500.
        assert any("netem limit 17500 delay 7ms" in ln for ln in out.stdout.splitlines())
    else:
        assert out.returncode == 2 and "backend netem refused" in out.stderr
        assert "netem limit" not in out.stdout


def test_dry_run_with_bad_override_fails_clearly():
    out = subprocess.run([sys.executable, "-m", "harness.cli", "topo", "up",
                          str(REPO / "topologies/lan.yaml"), "--dry-run", "--set", "links.lan"],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 2
    assert "write KEY=VALUE" in out.stderr


def test_judge_refuses_rtt_and_rate_outside_tolerance():
    topology = load_topology(REPO / "topologies/dumbbell-wan.yaml",
                             {"links.cold.delay_ms": "25", "links.cold.rate_mbit": "10"})
    spec = topology.links["cold"]
    expected = expected_goodput_bps(10, "wb-linkem")
    good = {"ping_ms": [50.2] * 20, "connect_ms": [49.9] * 5, "upload_bps": expected * 1.04,
            "download_bps": expected * 0.97}
    assert judge("cold", spec, "userspace", good)["problems"] == []
    bad = {**good, "ping_ms": [50.7] * 20, "download_bps": expected * 0.9}
    problems = judge("cold", spec, "userspace", bad)["problems"]
    assert len(problems) == 2
    # Configured: 50 ms of delay plus a 60-byte probe serialised at 10 Mbit/s each way.
    assert "ping RTT median 50.700 ms vs configured 50.096 ms" in problems[0]
    assert "b_to_a" in problems[1] and "10 Mbit/s" in problems[1]


def test_rtt_tolerance_is_one_percent_or_a_fifth_of_a_millisecond():
    assert rtt_tolerance_ms(100, 0, 20) == pytest.approx(1.0)
    assert rtt_tolerance_ms(5, 0, 20) == pytest.approx(0.2)
    assert rtt_tolerance_ms(100, 4, 20) > 1.0  # jitter widens it by the median's error


def test_judge_leaves_rate_unjudged_under_loss():
    topology = load_topology(REPO / "topologies/dumbbell-wan.yaml",
                             {"links.cold.rate_mbit": "10", "links.cold.a_to_b.loss_pct": "1"})
    raw = {"ping_ms": [100.1] * 20, "connect_ms": [100.1] * 5, "download_bps": 9.6e6}
    result = judge("cold", topology.links["cold"], "userspace", raw)
    assert result["problems"] == []
    assert result["rate"]["a_to_b"]["judged"] is False
    assert result["rate"]["b_to_a"]["judged"] is True
