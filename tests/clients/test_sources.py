"""One fallback rule for source addresses on bare loopback runs: clients/sources.py, with
wb-sclient's C copy and asyncgen held to it; topologies plan outside its block."""

from __future__ import annotations

import ipaddress
import json
import socket
import subprocess
from pathlib import Path

import pytest

from clients import sources
from clients.asyncgen.options import parse_args
from harness.topology.addressing import loopback_addresses
from harness.topology.model import Topology


def test_fallback_only_past_one_address_and_only_on_loopback():
    per = sources.CONNS_PER_SOURCE
    assert sources.loopback_fallback(per, ["127.0.0.1"]) == []
    assert sources.loopback_fallback(per + 1, ["127.0.0.1"]) == ["127.100.0.1", "127.100.0.2"]
    assert len(sources.loopback_fallback(2 * per + 1, ["127.0.0.1"])) == 3
    assert sources.loopback_fallback(per + 1, ["127.0.0.1", "198.18.1.2"]) == []


def test_given_addresses_win_and_a_cidr_names_its_hosts():
    assert sources.source_addresses("127.77.0.0/29", ["127.0.0.1"], 1) == [
        f"127.77.0.{i}" for i in range(1, 7)]
    assert sources.source_addresses(["127.0.0.5"], ["127.0.0.1"], 10**6) == ["127.0.0.5"]


def test_asyncgen_takes_the_rule():
    args = parse_args(["--target", "127.0.0.1:9", "--cold", "5001", "--duration", "1"])
    assert args.sources == sources.loopback_fallback(5001, ["127.0.0.1"])
    assert parse_args(["--target", "127.0.0.1:9", "--cold", "5001", "--duration", "1",
                       "--source", "auto"]).sources == args.sources


@pytest.mark.parametrize("cold", [sources.CONNS_PER_SOURCE, 2 * sources.CONNS_PER_SOURCE + 1])
def test_sclient_falls_back_like_the_python_rule(sclient: Path, tmp_path: Path, cold: int):
    expected = sources.loopback_fallback(cold, ["127.0.0.1"])
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.settimeout(10)
        target = f"127.0.0.1:{listener.getsockname()[1]}"
        out = tmp_path / "r.json"
        # one connection opens at once (ramp 1/s); the run ends before the next
        proc = subprocess.Popen([str(sclient), "--target", target, "--cold", str(cold),
                                 "--cold-ramp", "1", "--duration", "0.5", "--workers", "1",
                                 "--json", str(out)], stderr=subprocess.PIPE, text=True)
        conn, (peer, _) = listener.accept()
        conn.close()
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    config = json.loads(out.read_text())["config"]
    assert config["source_addr_count"] == len(expected)
    assert peer == (expected[0] if expected else "127.0.0.1")


def test_topology_loopback_plans_stay_out_of_the_fallback_block():
    topology = Topology.model_validate({
        "name": "t", "loopback": True, "hosts": {"server": {"role": "server"},
                               "hot": {"role": "hot", "source_addresses": 250},
                               "cold": {"role": "cold", "source_addresses": 250}}})
    for addresses in loopback_addresses(topology).values():
        assert all(ipaddress.ip_address(a) not in sources.FALLBACK_NET for a in addresses)
