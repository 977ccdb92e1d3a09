"""Addresses wherever a topology is written (its file, `--set`, a scenario's `topology.set`):
hosts' addresses and links' subnets in 198.18.0.0/15, an address where an address goes and a
subnet where a subnet goes, none on a loopback topology (whose hosts are 127.0.0.1 and
127.0.i.x whatever it says); each refused in one line before anything starts, exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.topology.addressing import host_addresses
from harness.topology.model import TopologyError, load_topology
from tests.conftest import REPO

LOOPBACK = REPO / "topologies/loopback.yaml"
DUMBBELL = REPO / "topologies/dumbbell-wan.yaml"


@pytest.mark.parametrize("address", ["10.0.0.1", "198.18.5.1"])
def test_a_loopback_topology_refuses_an_address_it_would_not_use(address):
    with pytest.raises(TopologyError, match=rf"hosts.server.address: {address}: a loopback "
                                            r"topology's hosts are 127\.0\.0\.1"):
        load_topology(LOOPBACK, {"hosts.server.address": address})


def test_a_loopback_topology_without_addresses_loads():
    assert load_topology(LOOPBACK).loopback


@pytest.mark.parametrize("address,said", [
    ("198.19.1.1/24", "'198.19.1.1/24' is a subnet, not an address; give one address, "
                      "e.g. hosts.server.address=198.19.1.1"),
    ("198.19.1", "'198.19.1' is not an IPv4 address"),
    ("10.0.0.1", "10.0.0.1 is outside 198.18.0.0/15"),
    ("::1", "'::1' is not an IPv4 address"),
])
def test_a_host_address_that_is_not_one_of_the_range_is_refused(address, said):
    with pytest.raises(TopologyError) as refused:
        load_topology(DUMBBELL, {"hosts.server.address": address})
    assert f"hosts.server.address: {said}" in str(refused.value)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("subnet,said", [
    ("198.18.2.0/33", "'198.18.2.0/33' is not an IPv4 subnet"),
    ("192.168.1.0/24", "192.168.1.0/24 is outside 198.18.0.0/15"),
    ("198.16.0.0/14", "198.16.0.0/14 is outside 198.18.0.0/15"),
])
def test_a_link_subnet_that_is_not_one_of_the_range_is_refused(subnet, said):
    with pytest.raises(TopologyError, match=f"links.cold.subnet: {said}"):
        load_topology(DUMBBELL, {"links.cold.subnet": subnet})


def test_addresses_in_the_range_are_used():
    topology = load_topology(DUMBBELL, {"hosts.server.address": "198.19.9.1",
                                        "links.cold.subnet": "198.18.9.0/24"})
    assert host_addresses(topology)["server"] == ("198.19.9.1",)


def scenario(tmp_path: Path, topology: Path, key: str, value: str) -> Path:
    path = tmp_path / "addressed.yaml"
    path.write_text(f"name: addressed\ntopology: {{file: {topology}, set: {{{key}: '{value}'}}}}\n"
                    "hot: {generator: sclient, conns: 1, rate_rps: 10}\n"
                    "warmup_s: 0\nduration_s: 0.2\n")
    return path


@pytest.mark.parametrize("topology,value,said", [
    (LOOPBACK, "10.0.0.1", "a loopback topology's hosts are 127.0.0.1"),
    (DUMBBELL, "198.19.1.1/24", "is a subnet, not an address"),
    (DUMBBELL, "10.0.0.1", "is outside 198.18.0.0/15"),
])
def test_a_run_refuses_a_topology_set_address_before_anything_starts(tmp_path, topology,
                                                                     value, said):
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run",
                           str(scenario(tmp_path, topology, "hosts.server.address", value)),
                           "--out", str(out)], capture_output=True, text=True, timeout=60,
                          cwd=REPO)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    # the scenario's own file:line: the `topology:` line whose `set` wrote the address
    assert "addressed.yaml:2: topology" in done.stderr and "hosts.server.address" in done.stderr
    assert said in done.stderr
    assert not out.exists(), "a refused topology must not create a run directory"


def test_topo_up_refuses_a_subnet_given_as_an_address():
    done = subprocess.run([sys.executable, "-m", "harness.cli", "topo", "up", str(DUMBBELL),
                           "--dry-run", "--set", "hosts.server.address=198.19.1.1/24"],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "is a subnet, not an address" in done.stderr
