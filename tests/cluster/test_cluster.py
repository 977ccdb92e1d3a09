"""Several hosts through Dask distributed: a scheduler and two hot workers (`wanbench
worker`) on loopback, real wb-sclient shards against a real wb-server."""

from __future__ import annotations

import concurrent.futures
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from clients import LoadSpec, validity
from clients.schema import Histogram, merge_documents, skeleton
from clients.spec import sclient_sockets
from clients.targets import TargetRefused
from harness.cluster import ClusterError
from harness.cluster.agent import HostAgent
from harness.cluster.coordinator import (
    connect,
    connect_started,
    hosts_holding,
    judged_merge,
    refused,
    run_load,
    split,
    vouched,
    workers_of,
)
from harness.cluster.namespaces import stop_all
from harness.cluster.security import Access, Certs
from harness.servers import running
from tests.clients.conftest import server_config
from tests.conftest import REPO, build, free_port, needs_root

distributed = pytest.importorskip("distributed", reason="the cluster extra is not installed")
WANBENCH = [sys.executable, "-m", "harness.cli"]
HOT_WORKERS = ("hot-a", "hot-b")


def sclient_spec(**fields) -> LoadSpec:
    return LoadSpec(generator="sclient", **fields)


@pytest.fixture(scope="module")
def scheduler(certs: Certs) -> Iterator[Access]:
    """A TLS scheduler on loopback with two hot workers; every process stopped after."""
    build("build/bin/wb-sclient")
    scheduler = Access(f"tls://127.0.0.1:{free_port()}", certs)
    procs = [subprocess.Popen([*WANBENCH, "cluster", "scheduler", *scheduler.options(),
                               "--host", "127.0.0.1", "--port",
                               scheduler.address.rpartition(":")[2]], stderr=subprocess.DEVNULL)]
    try:
        for name in HOT_WORKERS:
            procs.append(subprocess.Popen(
                [*WANBENCH, "worker", "--scheduler", scheduler.address, *scheduler.options(),
                 "--role", "hot", "--name", name], stderr=subprocess.DEVNULL))
        with connect_started(scheduler, 30) as client:
            client.wait_for_workers(len(HOT_WORKERS), timeout=60)
        yield scheduler
    finally:
        stop_all(procs)


@pytest.fixture
def server(tmp_path: Path):
    build("build/bin/wb-server")
    with running(server_config(tmp_path)) as srv:
        yield srv


@pytest.mark.slow
def test_merged_document_is_the_sum_of_its_shards(scheduler, server):
    spec = sclient_spec(targets=[server.address], hot_conns=4, rate_rps=400, duration_s=1.5,
                    warmup_s=0.5)
    with connect(scheduler) as client:
        load = run_load(client, spec, "hot")
    shards, merged = load.shards.values(), load.document
    assert sorted(load.shards) == sorted(HOT_WORKERS) == sorted(load.clocks)
    assert [doc["offered_rate_rps"] for doc in shards] == [200, 200]
    assert merged["shards"] == sum(doc["shards"] for doc in shards) == 2
    for key in ("scheduled", "sent"):
        assert merged["requests"][key] == sum(doc["requests"][key] for doc in shards)
    assert merged["replies"]["total"] == sum(doc["replies"]["total"] for doc in shards) > 0
    assert merged["reply_rate_rps"] == pytest.approx(sum(d["reply_rate_rps"] for d in shards))
    for kind in ("corrected", "uncorrected"):
        assert merged["latency"][kind]["count"] == sum(d["latency"][kind]["count"]
                                                       for d in shards)
    # the verdict is each shard's, named (both ways: test_merge_adds_counts_and_the_verdict_...);
    # whether this machine kept 200 req/s on time in each is not what is tested here
    assert merged["valid"] == (not merged["invalid_reasons"])
    assert all(reason.split(":")[0] in HOT_WORKERS for reason in merged["invalid_reasons"])


@pytest.mark.slow
def test_a_worker_refuses_a_target_outside_the_ranges_even_when_asked(scheduler):
    spec = sclient_spec(targets=["10.0.0.1:80"], hot_conns=2, rate_rps=10, duration_s=1,
                    allow_any_target=True)
    with connect(scheduler) as client:
        with pytest.raises(ClusterError, match="refusing to send load to 10.0.0.1"):
            run_load(client, spec, "hot")
        address = next(iter(workers_of(client, "hot")))
        # the future held to the end: an actor lives while its key is referenced, and a handle
        # fetched outside client.as_current() holds no reference of its own
        held = client.submit(HostAgent, 60, actor=True, workers=[address], pure=False)
        agent = held.result()
        with client.as_current():
            with pytest.raises(TargetRefused):
                agent.start_hot(spec, 0.0).result(timeout=30)
            agent.stop().result(timeout=30)


def generators_loading(address: str) -> list[psutil.Process]:
    """The wb-sclient processes sending load to address, on this machine."""
    return [proc for proc in psutil.process_iter(["name", "cmdline"])
            if proc.info["name"] == "wb-sclient"
            and address in " ".join(proc.info["cmdline"] or ())]


@pytest.mark.slow
def test_a_worker_lost_mid_run_is_named_and_its_peers_generators_stop(scheduler, server):
    """A third hot worker killed while its shard runs: the run says which host it was, and
    the other two hosts' generators stop at once, not at the end of their 10 s window."""
    worker = subprocess.Popen([*WANBENCH, "worker", "--scheduler", scheduler.address,
                               *scheduler.options(), "--role", "hot", "--name", "doomed-a"],
                              stderr=subprocess.DEVNULL)
    spec = sclient_spec(targets=[server.address], hot_conns=3, rate_rps=150, duration_s=10,
                        warmup_s=0.2)
    try:
        with connect(scheduler) as client:
            client.wait_for_workers(len(HOT_WORKERS) + 1, timeout=60)
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                running_load = pool.submit(run_load, client, spec, "hot")
                deadline = time.monotonic() + 30
                while len(generators_loading(server.address)) < 3:
                    assert time.monotonic() < deadline, "the three shards did not start"
                    time.sleep(0.05)
                worker.kill()
                with pytest.raises(ClusterError, match="worker doomed-a was lost"):
                    running_load.result(timeout=8)  # well before the window's end
        assert generators_loading(server.address) == []
    finally:
        worker.kill()
        worker.wait()


def test_an_unreachable_scheduler_is_a_clear_error_before_anything_starts(certs: Certs):
    done = subprocess.run([*WANBENCH, "load", "--cluster", f"tls://127.0.0.1:{free_port()}",
                           "--certs", str(certs.directory), "--target", "127.0.0.1:9",
                           "--hot-conns", "1", "--rate", "10"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "did not answer" in done.stderr and "Traceback" not in done.stderr


def test_refused_is_only_a_port_nothing_listens_on():
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert not refused(f"tls://127.0.0.1:{port}", 1)
    assert refused(f"tls://127.0.0.1:{port}", 1)  # closed now
    assert not refused("tls://127.0.0.1", 1)  # no port: Dask's default, the Client's to try


def test_a_scheduler_that_never_answered_leaves_no_thread_behind():
    # each failed Client used to leave its IO-loop thread running: connect_started tries
    # every 0.1 s while a scheduler starts, and a runner lives on after a refusal
    def loops() -> int:
        return sum(thread.name == "IO loop" for thread in threading.enumerate())

    before = loops()
    for _ in range(3):
        with pytest.raises(ClusterError, match="nothing listens there"):
            connect(Access(f"tcp://127.0.0.1:{free_port()}", None), 1.0)
    assert loops() == before


def test_a_bad_role_is_refused_before_dask_starts():
    done = subprocess.run([*WANBENCH, "worker", "--scheduler", "tcp://127.0.0.1:9",
                           "--role", "Hot Host"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "is not a role name" in done.stderr


def test_a_single_box_load_or_run_does_not_import_dask():
    done = subprocess.run([sys.executable, "-c", "import sys, harness.commands.load, "
                           "harness.commands.worker, harness.commands.run, harness.runner.run; "
                           "print('distributed' in sys.modules)"],
                          capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "False"


def test_split_spreads_connections_and_rate_over_shards():
    spec = sclient_spec(targets=["127.0.0.1:9"], hot_conns=5, rate_rps=1000, cold_conns=3)
    shards = split(spec, 2)
    assert [s.hot_conns for s in shards] == [3, 2]
    assert [s.cold_conns for s in shards] == [2, 1]
    assert sum(s.rate_rps for s in shards) == pytest.approx(1000)
    assert len(split(sclient_spec(targets=["127.0.0.1:9"], hot_conns=1), 3)) == 1


def test_an_s_client_split_keeps_the_sockets_each_part_of_the_rate_needs():
    needed = sclient_sockets(2000, 0.5, 0.5)
    spec = sclient_spec(targets=["127.0.0.1:9"], hot_conns=needed, rate_rps=2000,
                        requests_per_conn=1, overload="sclient", connect_timeout_s=0.5,
                        response_timeout_s=0.5)
    shards = split(spec, 2)
    assert sum(s.rate_rps for s in shards) == pytest.approx(2000)
    assert [s.hot_conns for s in shards] == [sclient_sockets(s.rate_rps, 0.5, 0.5)
                                             for s in shards]


def _document(latencies_ns: list[int], errors: int, late_sends: int = 0) -> dict:
    hist = Histogram()
    for ns in latencies_ns:
        hist.record(ns)
    doc = skeleton("sclient", {"hot_conns": 4, "rate_rps": 500.0, "warmup_s": 1.0})
    doc.update(duration_s=1.0, reply_rate_rps=float(len(latencies_ns)), late_sends=late_sends,
               late_threshold_us=1000.0, requests={"scheduled": 100, "sent": 100,
                                                   "queued": 0, "dropped": 0},
               replies={"total": len(latencies_ns), "by_status": {}})
    doc["errors"] = {**doc["errors"], "reset": errors}
    doc["latency"] = {kind: hist.to_dict() for kind in doc["latency"]}
    return doc


def test_merge_adds_counts_and_the_verdict_keeps_every_shards_reasons():
    a, b = _document([10_000] * 3, 1), _document([90_000] * 2, 2, late_sends=20)
    a["first_send_unix_s"], b["first_send_unix_s"] = 1_800_000_000.5, 1_800_000_000.2
    merged = merge_documents({"a": a, "b": b})
    assert merged["first_send_unix_s"] == 1_800_000_000.2  # the earliest shard's
    assert merged["replies"]["total"] == 5 and merged["reply_rate_rps"] == 5.0
    assert merged["errors"]["reset"] == 3 and merged["shards"] == 2
    assert merged["latency"]["corrected"]["count"] == 5
    # the config says what the shards ran between them, not what the first one did
    assert merged["config"] == {"hot_conns": 8, "rate_rps": 1000.0, "warmup_s": 1.0}
    # judged shard by shard (each its own generator): b's late sends, named, make it invalid
    spec = sclient_spec(targets=["127.0.0.1:9"], hot_conns=4, rate_rps=100, duration_s=1)
    judged, facts = judged_merge({"a": a, "b": b}, {"a": spec, "b": spec}, {})
    assert not judged["valid"] and judged["invalid_codes"] == ["late_sends"]
    assert judged["invalid_reasons"][0].startswith("b: late sends: 20 of 100")
    assert judged["replies"]["total"] == 5 and sorted(facts.generators) == ["a", "b"]
    b["late_sends"] = 1  # 1 %: within the rule
    assert judged_merge({"a": a, "b": b}, {"a": spec, "b": spec}, {})[0]["valid"]


def test_a_clock_offset_over_the_tolerance_invalidates():
    assert validity.clock_offset("hot-a", 0.001, 0.001, 10) is None
    reason = validity.clock_offset("hot-a", 0.2, 0.001, 10)
    assert "hot-a" in reason.sentence and reason.code is validity.Code.CLOCK_OFFSET


@pytest.mark.slow
def test_a_run_without_a_worker_for_a_host_it_uses_is_refused_naming_the_fix(scheduler,
                                                                            tmp_path: Path):
    """Only hot workers joined: a topology's server host has none (its two hot hosts have
    theirs); a loopback scenario has no addresses other machines reach."""
    topology = tmp_path / "two-hot.yaml"
    topology.write_text("name: two-hot\nhosts:\n  web: {role: server}\n  near: {role: hot}\n"
                        "  far: {role: hot}\nlinks:\n  a: {a: near, b: web}\n"
                        "  b: {a: far, b: web}\n")
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"name: s\ntopology: {{file: {topology}}}\n")
    for path, said in ((scenario, "no worker stands for topology host 'web' (role server"),
                       (REPO / "scenarios/quickstart.yaml", "give a namespace topology")):
        done = subprocess.run([*WANBENCH, "run", str(path), "--out", str(tmp_path / "out"),
                               "--cluster", scheduler.address, *scheduler.options()],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and said in done.stderr, done.stderr
        assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()


@pytest.fixture
def held_elsewhere() -> Iterator[str]:
    """An address of the benchmarking range a test namespace holds (on a veth end)."""
    name, address = "tnet-held", "198.18.0.9"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        for args in (["link", "add", "d0", "type", "veth", "peer", "name", "d1"],
                     ["addr", "add", f"{address}/32", "dev", "d0"]):
            subprocess.run(["ip", "-n", name, *args], check=True)
        yield address
    finally:
        subprocess.run(["ip", "netns", "del", name], check=True)


@needs_root
@pytest.mark.slow
def test_the_run_vouches_for_the_targets_its_hosts_hold(scheduler, held_elsewhere):
    """`load --cluster`: a 198.18.0.0/15 target one of the cluster's hosts holds is allowed
    though the run's machine may hold none (asked of every worker)."""
    with connect(scheduler) as client:
        assert hosts_holding(client, [held_elsewhere, "198.18.0.10"]) == (held_elsewhere,)
        spec = vouched(client, sclient_spec(targets=[f"{held_elsewhere}:80", "127.0.0.1:80"],
                                            hot_conns=1))
    assert spec.cluster_addresses == (held_elsewhere,)
