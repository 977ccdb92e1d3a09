"""Which worker stands for which topology host, with the host's addresses from the topology;
and a cluster run refused, naming the fix, before anything starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.cluster import ClusterError
from harness.cluster.agent import missing_addresses
from harness.cluster.placement import place
from harness.topology import load_topology
from harness.topology.addressing import host_addresses, plan_addresses
from harness.topology.model import Topology, TopologyError
from tests.conftest import REPO, free_port

DUMBBELL = load_topology(REPO / "topologies/dumbbell-wan.yaml")
WANBENCH = [sys.executable, "-m", "harness.cli"]
SERVER = {"tcp://s:1": ("srv", ["server"])}


def two_hot_hosts(tmp_path: Path) -> Topology:
    path = tmp_path / "two-hot.yaml"
    path.write_text("name: two-hot\nhosts:\n  web: {role: server}\n  near: {role: hot}\n"
                    "  far: {role: hot}\nlinks:\n  a: {a: near, b: web}\n  b: {a: far, b: web}\n")
    return load_topology(path)


def test_each_host_gets_the_worker_of_its_role_and_the_topologys_addresses():
    workers = {**SERVER, "tcp://h:1": ("h", ["hot"]), "tcp://c:1": ("c", ["cold"])}
    placement = place(DUMBBELL, workers, needs_cold=True)
    assert (placement.server.name, placement.server.host) == ("srv", "server")
    assert [(hw.name, hw.host) for hw in placement.hot] == [("h", "hot")]
    assert [(hw.name, hw.host) for hw in placement.cold] == [("c", "cold")]
    # the addresses a namespace run gives the hosts, whatever its prefix
    plan = plan_addresses(DUMBBELL, "wbabc")
    assert placement.cold[0].addresses == plan.hosts["cold"].addresses
    assert len(placement.cold[0].addresses) == 8
    assert place(DUMBBELL, workers, needs_cold=False).cold == ()  # no cold load, no cold host


def test_the_hot_load_goes_to_a_worker_per_hot_host_named_ones_first(tmp_path: Path):
    topology = two_hot_hosts(tmp_path)
    workers = {**SERVER, "tcp://a:1": ("a", ["hot"]), "tcp://b:1": ("b", ["far"]),
               "tcp://c:1": ("c", ["hot"])}
    placement = place(topology, workers, needs_cold=False)
    assert [(hw.host, hw.name) for hw in placement.hot] == [("near", "a"), ("far", "b")]
    assert placement.unused == ("c",)


def test_a_host_without_a_worker_or_with_two_is_refused_naming_the_fix(tmp_path: Path):
    with pytest.raises(ClusterError, match=r"no worker stands for topology host 'cold' "
                                           r"\(role cold, address 198.19.3.1\).*--role cold"):
        place(DUMBBELL, {**SERVER, "tcp://h:1": ("h", ["hot"])}, needs_cold=True)
    with pytest.raises(ClusterError, match="no worker stands for topology host 'far'"):
        place(two_hot_hosts(tmp_path), {**SERVER, "tcp://a:1": ("a", ["hot"])},
              needs_cold=False)
    # in the dumbbell the hot host is named `hot`: two hot workers both name it
    with pytest.raises(ClusterError, match="h1, h2 all stand for topology host 'hot'"):
        place(DUMBBELL, {**SERVER, "tcp://a:1": ("h1", ["hot"]), "tcp://b:1": ("h2", ["hot"])},
              needs_cold=False)


def test_a_loopback_topology_has_no_addresses_for_other_machines():
    with pytest.raises(TopologyError, match="give a namespace topology"):
        host_addresses(load_topology(REPO / "topologies/loopback.yaml"))
    assert host_addresses(DUMBBELL)["server"] == ("198.19.1.1",)


def test_a_machine_holds_loopback_but_not_a_benchmark_address():
    assert missing_addresses(["127.0.0.1", "198.19.250.1"]) == ["198.19.250.1"]


def test_run_refuses_an_unreachable_scheduler_before_anything_starts(tmp_path: Path, certs):
    done = subprocess.run([*WANBENCH, "run", str(REPO / "scenarios/quickstart.yaml"), "--out",
                           str(tmp_path), "--cluster", f"tls://127.0.0.1:{free_port()}",
                           "--certs", str(certs.directory)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "did not answer" in done.stderr and "Traceback" not in done.stderr
    assert not any(tmp_path.iterdir())  # no run directory


def test_run_refuses_cluster_with_kernel():
    done = subprocess.run([*WANBENCH, "run", "x.yaml", "--cluster", "tcp://127.0.0.1:9",
                           "--kernel", "host"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "give one of them" in done.stderr


def test_only_the_hosts_that_keep_the_scheduled_start_have_their_clocks_judged():
    """The server's samplers and the hot generators start at the scheduled time: an offset
    there invalidates the point; the cold hosts only hold connections opened before it, so
    theirs (half the WAN round trip of uncertainty) does not. Both cluster merges (`wanbench
    load --cluster`, a `run --cluster` point) judge so, through clients.validity."""
    from clients import validity

    hot = validity.GeneratorFacts("sclient", asked_s=1.0)
    on_time, off = validity.ClockOffset(0.0001, 0.001), validity.ClockOffset(0.5, 0.05)

    def verdict(clocks: dict) -> validity.Verdict:
        return validity.judge(validity.Facts({"hot": hot}, clocks, sampler_host="server"))

    assert verdict({"server": on_time, "hot": on_time, "cold": off}).valid
    for late in ("server", "hot"):
        judged = verdict({"server": on_time, "hot": on_time, "cold": on_time, late: off})
        (reason,) = judged.reasons
        assert reason.code is validity.Code.CLOCK_OFFSET and late in reason.sentence


def test_every_shard_may_load_the_server_host_the_run_checked():
    """The server's addresses are held on another machine than a client host's: the run,
    which checked that the server's worker holds them, vouches for them in each shard."""
    from clients import LoadSpec
    from harness.cluster.point import ClusterPoint

    workers = {**SERVER, "tcp://h:1": ("h", ["hot"]), "tcp://c:1": ("c", ["cold"])}
    placement = place(DUMBBELL, workers, needs_cold=True)
    point = ClusterPoint(None, placement, None, 7, Path("raw"), print)
    spec = LoadSpec(generator="sclient", targets=["198.19.1.1:8080"], hot_conns=2,
                    cold_conns=16)
    for hosts in (placement.hot, placement.cold):
        for shard in point._shards(spec, hosts):
            assert shard.cluster_addresses == placement.server.addresses == ("198.19.1.1",)
