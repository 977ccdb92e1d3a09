"""`wanbench run --cluster` across network namespaces: the dumbbell-wan topology brought up
by the test stands for three machines, a scheduler and a `server` worker in the server's
namespace, a `hot` and a `cold` worker each in its own (the cold one across the 100 ms link).
The scenario's hosts are those namespaces, addressed from the topology as a run on one
machine addresses them."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from clients.validity import Code
from harness.cluster.namespaces import WANBENCH, NamespaceCluster, namespace_cluster
from harness.runner.child import ChildRun
from harness.runner.outcome import RunRequest
from tests.conftest import REPO, build, needs_root, not_a_busy_machine

pytest.importorskip("distributed", reason="the cluster extra is not installed")
DUMBBELL = REPO / "topologies/dumbbell-wan.yaml"
ROLES = ("server", "hot", "cold")  # a worker per topology host, named and roled as it
NOTHING_LEFT = {host: [] for host in ROLES}  # no server, no generator in any namespace
COLD_CONNS = 12
SWEEP_WINDOW_S = 1.0
LOST_WINDOW_S = 2.0  # long enough to kill a worker inside it
SCENARIO = f"""\
name: cluster-sweep
topology: {{file: {DUMBBELL}}}
server: {{dispatch: epoll, accept: multi, reply_bytes: 92}}
hot: {{generator: sclient, conns: 4, rate_rps: 200}}
cold: {{conns: {COLD_CONNS}}}
sweep:
  hot.rate_rps: [200, 400]
repetitions: 1
warmup_s: 0.5
duration_s: {{duration}}
"""


def scenario(tmp_path: Path, duration_s: float) -> Path:
    path = tmp_path / f"cluster-sweep-{duration_s:g}.yaml"
    path.write_text(SCENARIO.replace("{duration}", f"{duration_s:g}"))
    return path


def finish(run: ChildRun, timeout: float = 120) -> tuple[int, str]:
    """The run's exit status (its typed result's) and what it said."""
    return run.wait(timeout).status, run.stderr


def run_dir_of(out: Path) -> Path:
    """The one run under results root out."""
    (run_dir,) = (out / "cluster-sweep").iterdir()
    return run_dir


def points(run_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(run_dir / "points.parquet").sort_values("offered_rate_rps")


@pytest.fixture(scope="module")
def cluster() -> Iterator[NamespaceCluster]:
    build("build/bin/wb-sclient")
    build("build/bin/wb-server")
    # its Python processes beside the light server, off the generators' CPU (cpus.generator)
    with namespace_cluster(DUMBBELL, cpu=0) as found:
        yield found
        assert found.running() == NOTHING_LEFT
        running = [proc for proc in found.processes if proc.poll() is None]
    # each left when asked (SIGTERM), workers and scheduler alike: none had to be killed
    assert [proc.returncode for proc in running] == [0] * len(running)


@pytest.fixture(scope="module")
def sweep(cluster: NamespaceCluster, tmp_path_factory) -> Path:
    """The two-point sweep run across the cluster: its run directory."""
    tmp = tmp_path_factory.mktemp("sweep")
    # beside the rest of the suite the generator's sends may be late: judged, not fatal here
    status, err = finish(cluster.run(RunRequest(scenario=scenario(tmp, SWEEP_WINDOW_S),
                                                out=tmp / "results", allow_invalid=True)))
    assert status == 0, err
    return run_dir_of(tmp / "results")


@needs_root
@pytest.mark.slow
def test_a_sweep_runs_across_the_hosts_and_adds_up(cluster: NamespaceCluster, sweep: Path):
    frame = points(sweep)
    assert len(list((sweep / "points").glob("*.json"))) == 2
    assert list(frame["offered_rate_rps"]) == [200, 400]
    assert not_a_busy_machine(frame) == []
    for record_path in sorted((sweep / "points").glob("*.json")):
        record = json.loads(record_path.read_text())
        row = record["point"]
        shards = {host: json.loads((sweep / "raw" / record_path.stem / host / "hot.json")
                                   .read_text()) for host in ("hot",)}
        assert row["reply_rate_rps"] == pytest.approx(sum(d["reply_rate_rps"]
                                                          for d in shards.values()))
        cold = json.loads((sweep / "raw" / record_path.stem / "cold" / "cold.json").read_text())
        assert row["cold_held"] == cold["cold"]["held"] == COLD_CONNS
        assert sum(h["count"] for h in record["histograms"] if h["kind"] == "corrected") \
            == sum(d["latency"]["corrected"]["count"] for d in shards.values())
        # one window, decided on the run's clock: each host's sources measured it, converted
        # back through the host's measured offset (within the measurement's own uncertainty)
        for source in ("generator", "server_stats", "sampler"):
            for edge in ("start", "end"):
                assert abs(row[f"edge_{source}_{edge}_ms"]) < 0.01 * row["window_s"] * 1e3, \
                    (source, edge, row)
    manifest = json.loads((sweep / "manifest.json").read_text())["cluster"]
    assert manifest["scheduler"] == cluster.scheduler.address
    assert sorted(manifest["hosts"]) == sorted(ROLES)
    for host, about in manifest["hosts"].items():
        assert about["stands_for"] == host and about["kernel"]["release"] and about["cpu"]
        assert about["addresses"][0] == cluster.handle.address(host)  # type: ignore[attr-defined]
    for timing in manifest["points"].values():
        assert sorted(timing) == sorted(ROLES)
        hot = timing["hot"]
        assert 0 <= hot["start_lag_s"] < hot["first_request_lag_s"] < 0.5


@needs_root
@pytest.mark.slow
@pytest.mark.timing
def test_the_sweep_agrees_with_the_same_scenario_on_one_machine(sweep: Path, tmp_path: Path):
    done = subprocess.run([*WANBENCH, "run", str(scenario(tmp_path, SWEEP_WINDOW_S)), "--out",
                           str(tmp_path / "results"), "--backend", "userspace",
                           "--allow-invalid"],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    here, there = points(run_dir_of(tmp_path / "results")), points(sweep)
    for one, spread in zip(here["reply_rate_rps"], there["reply_rate_rps"], strict=True):
        assert spread == pytest.approx(one, rel=0.1)


@needs_root
@pytest.mark.slow
def test_a_worker_lost_mid_point_is_invalid_and_resume_measures_only_it(
        cluster: NamespaceCluster, tmp_path: Path):
    run = cluster.run(RunRequest(scenario=scenario(tmp_path, LOST_WINDOW_S),
                                 out=tmp_path / "results"))
    records = tmp_path / "results" / "cluster-sweep"
    deadline = time.monotonic() + 90
    # the second point's generator running on the hot host: the first point is finished
    while not (len(list(records.glob("*/points/*.json"))) == 1
               and "wb-sclient" in cluster.running()["hot"]):
        assert time.monotonic() < deadline and run.poll() is None, "no second point ran"
        time.sleep(0.05)
    cluster.workers["hot"].send_signal(signal.SIGKILL)
    status, err = finish(run)
    assert status == 1, err
    assert cluster.running() == NOTHING_LEFT
    run_dir = run_dir_of(tmp_path / "results")
    frame = points(run_dir)
    lost = frame[frame["lost_host"].notna()]
    assert len(lost) == 1 and lost["lost_host"].iloc[0] == "hot", list(frame["invalid_reason"])
    assert not lost["valid"].iloc[0]
    assert "worker hot was lost" in lost["invalid_reason"].iloc[0]
    assert lost["invalid_codes"].iloc[0] == Code.WORKER_LOST
    assert not_a_busy_machine(frame[frame["lost_host"].isna()]) == []
    kept = frame[frame["lost_host"].isna()]["point_id"].iloc[0]
    kept_record = (run_dir / "points" / f"{kept}-r0.json").read_text()

    cluster.workers["hot"].wait()
    cluster.start_worker("hot")  # its replacement
    cluster.wait_for_workers(len(ROLES))
    status, err = finish(cluster.run(RunRequest(resume=run_dir, allow_invalid=True)))
    assert status == 0, err
    assert "1 of 2 point × repetition to measure" in err
    resumed = points(run_dir)
    assert len(resumed) == 2 and not_a_busy_machine(resumed) == []
    assert "lost_host" not in resumed or resumed["lost_host"].isna().all()
    assert (run_dir / "points" / f"{kept}-r0.json").read_text() == kept_record
    assert cluster.running() == NOTHING_LEFT
