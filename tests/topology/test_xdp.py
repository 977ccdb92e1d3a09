"""wb-linkem over AF_XDP, live on veth: the same shaping as the TUN path (the same seed drops
the same packets), its wiring, what it leaves behind (nothing), and the fallback to TUN
devices where AF_XDP is unavailable, each for real."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import clients.paths
from harness.topology import TopologyError, bring_up, load_topology
from harness.topology.backend_probe import choose_backend, emulator_backend_here
from harness.topology.backends import XDP
from harness.topology.ledger import Ledger
from harness.topology.netns import NETNS_DIR
from tests.conftest import REPO, build, needs_root
from tests.topology.leftovers import emulator_pids
from tests.topology.test_userspace import (
    bulk,
    ping,
)

pytestmark = [needs_root, pytest.mark.slow, pytest.mark.usefixtures("af_xdp")]
LAN = REPO / "topologies/lan.yaml"
# A process without CAP_NET_RAW may open no AF_XDP socket: what a container or a kernel
# without XDP sockets gives wb-linkem, for real. TUN devices need no such capability.
WITHOUT_AF_XDP = ["setpriv", "--bounding-set=-net_raw", "--inh-caps=-net_raw", "--"]
ETHERNET_TCP_IP_BYTES = 14 + 20 + 32  # a frame's headers: Ethernet, IPv4, TCP with timestamps


def up(no_leftovers, overrides: dict[str, str], backend: str = "xdp", calibrate: bool = False):
    handle = bring_up(load_topology(LAN, overrides), backend, calibrate=calibrate)
    no_leftovers.append(handle.prefix)
    return handle


def xdp_programs(handle) -> list[int]:
    """Ids of the XDP programs attached to the topology's devices (all in its namespaces)."""
    ids = []
    for host in handle.hosts:
        out = subprocess.run(["ip", "-j", "-d", "-n", handle.netns(host), "link", "show"],
                             capture_output=True, text=True, check=True).stdout
        ids += [link["xdp"]["prog"]["id"] for link in json.loads(out) if "xdp" in link]
    return ids


def loaded(program: int) -> bool:
    return subprocess.run(["bpftool", "prog", "show", "id", str(program)],
                          capture_output=True).returncode == 0


def lost_pings(handle, count: int) -> list[int]:
    """The icmp_seq of each echo request of `count` that got no reply."""
    argv = [*handle.exec_prefix("client"), "ping", "-n", "-c", str(count), "-i", "0.005",
            "-W", "1", handle.address("server")]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout
    answered = {int(seq) for seq in re.findall(r"icmp_seq=(\d+)", out)}
    return sorted(set(range(1, count + 1)) - answered)


def drops(no_leftovers, backend: str, seed: str) -> list[int]:
    with up(no_leftovers, {"links.lan.a_to_b.loss_pct": "20", "seed": seed}, backend) as h:
        lost = lost_pings(h, 200)
    forward = h.emulator_counters["lan"]["a_to_b"]
    assert forward["io"] == {"xdp": "xdp", "userspace": "tun"}[backend]
    assert forward["received"] == 200 and forward["dropped_loss"] == len(lost), forward
    return lost


def test_the_same_seed_drops_the_same_packets_on_both_paths(no_leftovers):
    """The core draws once per packet in arrival order whatever the I/O: the TUN and AF_XDP
    paths drop the same echo requests for one seed, and other ones for another."""
    tun, xdp = drops(no_leftovers, "userspace", "7"), drops(no_leftovers, "xdp", "7")
    assert 10 <= len(xdp) <= 70, xdp  # 20 % of 200, well within the draw's spread
    assert xdp == tun
    other = drops(no_leftovers, "xdp", "8")
    assert other != xdp and other == drops(no_leftovers, "userspace", "8")


def test_link_ends_are_veth_pairs_whose_far_ends_the_emulator_holds(no_leftovers):
    with up(no_leftovers, {"links.lan.emulate_unshaped": "true"}) as handle:
        link = handle.plan.links[0]
        assert handle.manifest()["links"]["lan"]["wiring"] == "wb-linkem-xdp"
        client = json.loads(subprocess.run(
            ["ip", "-j", "-d", "-n", handle.netns("client"), "link", "show"],
            capture_output=True, text=True, check=True).stdout)
        kinds = {dev["ifname"]: dev["linkinfo"]["info_kind"] for dev in client
                 if "linkinfo" in dev}
        # the client's device, and the far end of the server's pair, where the server's
        # frames reach the emulator; no TUN anywhere
        assert kinds == {link.a_dev: "veth", link.b_dev: "veth"}
        neighbours = subprocess.run(["ip", "-n", handle.netns("client"), "neigh", "show"],
                                    capture_output=True, text=True).stdout
        assert f"{link.b_addr} dev {link.a_dev} lladdr {link.mac('b')} PERMANENT" in neighbours
        assert len(xdp_programs(handle)) == 2  # one on each far end
        out = ping(handle, "-c", "3", "-i", "0.2")
    assert " 0% packet loss" in out
    for direction in ("a_to_b", "b_to_a"):
        counters = handle.emulator_counters["lan"][direction]
        assert (counters["io"], counters["xdp_mode"], counters["offload"]) == (
            "xdp", "native", "none")
        assert counters["forwarded"] == counters["received"] >= 3


def test_bulk_tcp_crosses_frame_by_frame_without_a_system_call_per_packet(no_leftovers):
    with up(no_leftovers, {"links.lan.emulate_unshaped": "true"}) as handle:
        received = bulk(handle, 50)
    assert received == 50 << 20  # checksums complete: the client's device computes them
    data = handle.emulator_counters["lan"]["a_to_b"]
    assert data["forwarded"] == data["received"] == data["reads"] >= received / 1448
    assert data["gso_reads"] == 0 and data["dropped_queue"] == data["write_errors"] == 0
    assert data["xdp_rx_ring_full"] == data["xdp_fill_ring_empty"] == 0
    # each frame is charged its own headers, Ethernet's included
    overhead = data["forwarded_bytes"] - received
    assert overhead == pytest.approx(data["forwarded"] * ETHERNET_TCP_IP_BYTES, rel=0.02)
    # receiving is a ring in shared memory; sending one sendto per batch
    assert data["receive_calls"] == 0
    assert data["send_calls"] * 4 <= data["forwarded"], data


def test_loss_and_queue_limit_act_per_frame(no_leftovers):
    overrides = {"links.lan.a_to_b.loss_pct": "10", "links.lan.rate_mbit": "50",
                 "links.lan.queue_limit": "30"}
    with up(no_leftovers, overrides) as handle:
        received = bulk(handle, 10)
    assert received == 10 << 20
    lossy = handle.emulator_counters["lan"]["a_to_b"]
    assert lossy["dropped_loss"] / lossy["received"] == pytest.approx(0.10, abs=0.02)
    assert lossy["max_queue_depth"] <= 30
    assert (lossy["received"] == lossy["forwarded"] + lossy["dropped_loss"]
            + lossy["dropped_queue"] + lossy["held_at_exit"] + lossy["write_errors"])


def test_a_killed_emulator_leaves_no_xdp_program(no_leftovers):
    """Its programs hang on BPF links the process holds: SIGKILL detaches them, and the
    teardown finds nothing more to do than the namespaces."""
    with up(no_leftovers, {"links.lan.delay_ms": "1"}) as handle:
        programs = xdp_programs(handle)
        assert len(programs) == 2 and all(loaded(p) for p in programs)
        (pid,) = handle.emulator_pids()
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5  # the kernel frees them once the process is gone
        while time.monotonic() < deadline and any(loaded(p) for p in programs):
            time.sleep(0.01)
        assert not any(loaded(p) for p in programs)
        assert xdp_programs(handle) == []


def test_teardown_removes_the_programs_with_the_emulator(no_leftovers):
    with up(no_leftovers, {"links.lan.delay_ms": "1"}) as handle:
        programs = xdp_programs(handle)
        prefix = handle.prefix
    assert programs and not any(loaded(p) for p in programs)
    assert emulator_pids(prefix) == []
    assert handle.emulator_counters["lan"]["exit_status"] == 0


def test_sanitizer_build_forwards_over_af_xdp_and_exits_clean(no_leftovers, monkeypatch):
    asan_dir = build("build/asan/bin/wb-linkem").parent
    monkeypatch.setattr(clients.paths, "BIN_DIR", asan_dir)
    overrides = {"links.lan.delay_ms": "2", "links.lan.jitter_ms": "1",
                 "links.lan.loss_pct": "5", "links.lan.rate_mbit": "50"}
    with up(no_leftovers, overrides) as handle:
        out = ping(handle, "-c", "200", "-i", "0.002", "-s", "1200")
        received = bulk(handle, 5)
    assert "packets transmitted" in out and received == 5 << 20
    counters = handle.emulator_counters["lan"]
    assert counters["exit_status"] == 0 and counters["stderr"] == "", counters["stderr"]
    assert counters["a_to_b"]["dropped_loss"] > 0


def test_auto_takes_af_xdp_where_netem_is_missing(state_dir):
    chosen, record = emulator_backend_here()
    assert chosen == XDP.name and record[XDP.name]["ok"]
    topology = load_topology(LAN, {"links.lan.delay_ms": "5"})
    ledger = Ledger.create("wbxdpt1", None, "probe")
    try:
        chosen, record = choose_backend("auto", topology, ledger)
    finally:
        ledger.remove()
    assert chosen in ("netem", XDP.name), record  # netem first wherever the kernel has it
    if chosen == XDP.name:
        assert record["reason"].startswith("netem unavailable")


# Run without CAP_NET_RAW (WITHOUT_AF_XDP): the probe's wb-linkem cannot open an AF_XDP
# socket, so `auto` must bring the link up on TUN devices, say why, and forward.
FALLBACK = textwrap.dedent("""
    import json, sys
    from harness.topology import bring_up, load_topology
    from harness.doctor import check_userspace_emulator
    topology = load_topology(sys.argv[1], {"links.lan.delay_ms": "1"})
    with bring_up(topology, "auto", calibrate=False) as handle:
        server = handle.address("server")
        import subprocess
        sink = subprocess.Popen([*handle.exec_prefix("server"), sys.executable, "-c",
            "import socket,sys; s=socket.socket(); s.bind((sys.argv[1], 5001)); s.listen();"
            "c,_=s.accept(); print(c.recv(5).decode(), flush=True)", server],
            stdout=subprocess.PIPE, text=True)
        import time; time.sleep(0.5)
        subprocess.run([*handle.exec_prefix("client"), sys.executable, "-c",
            "import socket,sys; socket.create_connection((sys.argv[1], 5001)).sendall(b'hello')",
            server], check=True, timeout=20)
        said = sink.stdout.readline().strip()
        sink.wait(timeout=10)
        prefix = handle.prefix
        wiring = handle.manifest()["links"]["lan"]["wiring"]
    doctor = check_userspace_emulator()
    print(json.dumps({"backend": handle.backend, "probe": handle.probe, "said": said,
                      "wiring": wiring, "prefix": prefix,
                      "io": handle.emulator_counters["lan"]["a_to_b"]["io"],
                      "doctor": [doctor.ok, doctor.detail, doctor.shortfall]}))
""")


def test_without_af_xdp_auto_falls_back_to_tun_and_says_so(no_leftovers, state_dir):
    done = subprocess.run([*WITHOUT_AF_XDP, sys.executable, "-c", FALLBACK, str(LAN)],
                          capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "WANBENCH_TOPO_STATE": str(state_dir)})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    no_leftovers.append(report["prefix"])
    assert report["probe"][XDP.name] == {"ok": False,
                                         "error": "AF_XDP socket: Operation not permitted"}
    if report["backend"] == "netem":
        pytest.skip("netem works here: auto never reaches the emulator's paths")
    assert (report["backend"], report["wiring"], report["io"]) == (
        "userspace", "wb-linkem", "tun")
    assert "xdp unavailable (AF_XDP socket: Operation not permitted)" in report["probe"]["reason"]
    assert report["said"] == "hello"  # the TUN path forwards
    ok, detail, shortfall = report["doctor"]
    assert (ok, shortfall) == (False, "TUN only")
    assert detail.startswith("TUN path") and "Operation not permitted" in detail


def test_doctor_states_the_af_xdp_path_where_it_works():
    from harness.doctor import check_userspace_emulator

    check = check_userspace_emulator()
    assert check.ok and check.detail.startswith("AF_XDP path"), check


def test_asking_for_xdp_where_it_is_unavailable_is_one_line_exit_2(state_dir):
    done = subprocess.run([*WITHOUT_AF_XDP, sys.executable, "-m", "harness.cli", "topo", "up",
                           str(LAN), "--backend", "xdp", "--no-calibrate", "--prefix", "wbxdpt2"],
                          capture_output=True, text=True, cwd=REPO, timeout=60,
                          env={**os.environ, "WANBENCH_TOPO_STATE": str(state_dir)})
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert "backend xdp refused: AF_XDP socket: Operation not permitted" in done.stderr
    assert "use --backend userspace" in done.stderr
    assert not [ns for ns in os.listdir(NETNS_DIR) if ns.startswith("wbxdpt2-")]


def test_emulator_names_a_missing_device_in_one_line(linkem):
    argv = [str(linkem), "--io", "xdp", "--a-netns", "/proc/self/ns/net", "--a-dev",
            "wbnosuchdev", "--b-netns", "/proc/self/ns/net", "--b-dev", "wbnosuchdev"]
    out = subprocess.run(argv, capture_output=True, text=True)
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert out.stderr.startswith("wb-linkem: wbnosuchdev: No such device")


def test_emulator_refuses_an_unknown_io_back_end(linkem):
    argv = [str(linkem), "--io", "dpdk", "--a-netns", "/x", "--a-dev", "a",
            "--b-netns", "/y", "--b-dev", "b"]
    out = subprocess.run(argv, capture_output=True, text=True)
    assert out.returncode == 2 and "--io tun|xdp" in out.stderr


def test_xdp_backend_refuses_what_it_cannot_do(state_dir):
    with pytest.raises(TopologyError, match="loopback topology has no links to emulate"):
        choose_backend("xdp", load_topology(REPO / "topologies/loopback.yaml"), None)
