"""`wanbench run` end to end on loopback: results, cold connections, kill and resume, nginx."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from harness.topology.backends import AUTO_ORDER, BACKENDS
from tests.conftest import build, not_a_busy_machine

REPO = Path(__file__).resolve().parents[2]
WANBENCH = [sys.executable, "-m", "harness.cli"]


@pytest.fixture(scope="module", autouse=True)
def binaries():
    build("build/bin/wb-server")
    build("build/bin/wb-sclient")


def write_scenario(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    return path


def run_scenario(tmp_path: Path, text: str, timeout: float = 120,
                 relative_out: bool = False) -> tuple[Path, str]:
    """Run a scenario to completion; returns its run directory and what it printed.
    relative_out: name the results root relative to the working directory, as users do."""
    out = tmp_path / "results"
    given = os.path.relpath(out, REPO) if relative_out else str(out)
    done = subprocess.run(WANBENCH + ["run", str(write_scenario(tmp_path, text)), "--out",
                                      given], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)
    (run,) = run_dirs(out)
    assert_exit_says_validity(done, run)
    assert not leftover_processes(out)
    return run, done.stdout


def assert_exit_says_validity(done: subprocess.CompletedProcess, run: Path) -> None:
    """Exit 0 when every point × repetition is valid, 1 when some are not (a busy machine
    can make a generator fall behind; the exit status must say so)."""
    points = pd.read_parquet(run / "points.parquet")
    expected = 1 if (~points["valid"].astype(bool)).any() else 0
    assert done.returncode == expected, (done.returncode, points["invalid_reason"].tolist(),
                                         done.stderr[-2000:])


def run_dirs(root: Path) -> list[Path]:
    return [p.parent for p in root.glob("*/*/manifest.json")]


def leftover_processes(marker: Path) -> list[str]:
    done = subprocess.run(["pgrep", "-af", str(marker)], capture_output=True, text=True)
    return [line for line in done.stdout.splitlines() if "pgrep" not in line]


SMALL = """
name: small
topology: {file: topologies/loopback.yaml}
server: {reply_bytes: 92}
hot: {generator: sclient, conns: 4, rate_rps: 500, spin_us: 100}
cold: {conns: 300, ramp_rps: 5000}
sweep:
  server.dispatch: [select, epoll]
repetitions: 1
warmup_s: 0.5
duration_s: 1.5
profile: true
"""


@pytest.mark.timing
def test_run_writes_a_complete_results_directory(tmp_path: Path):
    run, stdout = run_scenario(tmp_path, SMALL)
    manifest = json.loads((run / "manifest.json").read_text())
    for key in ("schema_version", "run_id", "scenario", "kernel", "sysctls", "cpu", "tools",
                "git_revision", "topology", "perf", "sweep_axes", "noise_sources"):
        assert key in manifest, key
    assert manifest["kernel"]["release"] == os.uname().release
    assert manifest["topology"]["backend"] == "none"
    assert manifest["sweep_axes"] == ["dispatch"]
    points = pd.read_parquet(run / "points.parquet")
    assert sorted(points["dispatch"]) == ["epoll", "select"]
    assert not_a_busy_machine(points) == []
    # 500 req/s offered, answered: the reply rate is measured, not assumed.
    assert points["reply_rate_rps"].between(450, 550).all()
    assert (points["cold_held"] == 300).all()
    assert (points["server_connections_max"] >= 304).all()
    assert (points["cpu_server_pct"] > 0).all()
    assert points["cpu_emulator_pct"].isna().all()  # loopback: no link to emulate
    counters = manifest["perf"]["hardware_counters"]
    assert (points["cycles_estimated"] == (not counters)).all()
    assert (points["dispatch_calls"] > 0).all()
    series = pd.read_parquet(run / "timeseries.parquet")
    assert {"generator", "server_proc", "server_cpu"} <= set(series["source"])
    hist = pd.read_parquet(run / "histograms.parquet")
    assert set(hist["kind"]) == {"corrected", "uncorrected", "tcp_srtt"}
    profiles = pd.read_parquet(run / "profiles.parquet")
    assert {"symbol", "layer", "samples", "pct"} <= set(profiles.columns)
    assert set(profiles["point_id"]) == set(points["point_id"])
    assert "small: median over valid repetitions" in stdout
    assert manifest["wanbench_version"]
    summary = json.loads((run / "summary.json").read_text())  # read without pandas
    assert [p["parameters"] for p in summary["points"]] == [{"dispatch": "select"},
                                                            {"dispatch": "epoll"}]
    assert summary["total"] == 2 and summary["valid"] == int(points["valid"].sum())
    assert summary["exit_status"] == (0 if points["valid"].all() else 1)
    for point, (_, row) in zip(summary["points"], points.set_index("dispatch")
                               .loc[["select", "epoll"]].iterrows(), strict=True):
        if point["valid"]:
            assert point["medians"]["reply_rate_rps"] == pytest.approx(row["reply_rate_rps"])
    hot_docs = list((run / "raw").glob("*/hot.json"))
    assert len(hot_docs) == 2
    assert all(json.loads(d.read_text())["config"]["spin_us"] == 100 for d in hot_docs)


RESUMABLE = """
name: resumable
topology: {file: topologies/loopback.yaml}
hot: {generator: sclient, conns: 2, rate_rps: 200}
sweep:
  server.dispatch: [select, poll, epoll, devpoll]
repetitions: 1
warmup_s: 0.2
duration_s: 1
"""


def _start(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen(WANBENCH + args, cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_for_records(out: Path, count: int, timeout: float = 60) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for run in run_dirs(out):
            if len(list((run / "points").glob("*.json"))) >= count:
                return run
        time.sleep(0.05)
    raise AssertionError(f"no {count} finished points within {timeout} s")


def test_sigkill_mid_sweep_then_resume_loses_and_duplicates_nothing(tmp_path: Path):
    out = tmp_path / "results"
    proc = _start(["run", str(write_scenario(tmp_path, RESUMABLE)), "--out", str(out)])
    run = _wait_for_records(out, 2)
    proc.kill()
    proc.wait()
    before = {p.name: p.stat().st_mtime_ns for p in (run / "points").glob("*.json")}
    deadline = time.monotonic() + 5
    while leftover_processes(out) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not leftover_processes(out), "children must die with the runner"
    done = subprocess.run(WANBENCH + ["run", "--resume", str(run)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert_exit_says_validity(done, run)
    points = pd.read_parquet(run / "points.parquet")
    assert sorted(points["dispatch"]) == ["devpoll", "epoll", "poll", "select"]
    assert not points.duplicated(["point_id", "repetition"]).any()
    after = {p.name: p.stat().st_mtime_ns for p in (run / "points").glob("*.json")}
    assert all(after[name] == mtime for name, mtime in before.items()), "finished points redone"
    # each session's own bring-up is kept, the killed one's too
    manifest = json.loads((run / "manifest.json").read_text())
    (resumption,) = manifest["resumptions"]
    for session in (manifest, resumption):
        assert session["topology"]["backend"] == "none"
        assert len(session["topology"]["instances"]) == 1


def test_sigint_stops_cleanly_and_keeps_finished_points(tmp_path: Path):
    out = tmp_path / "results"
    proc = _start(["run", str(write_scenario(tmp_path, RESUMABLE)), "--out", str(out)])
    run = _wait_for_records(out, 1)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert f"wanbench run --resume {run}" in "".join(stderr.split("\n"))
    kept = pd.read_parquet(run / "points.parquet")
    assert 1 <= len(kept) < 4
    summary = json.loads((run / "summary.json").read_text())  # of the points kept
    assert summary["exit_status"] == 130 and summary["total"] == len(kept)
    assert not leftover_processes(out)


NGINX = """
name: nginx-external
topology: {file: topologies/loopback.yaml}
server:
  kind: external
  name: nginx
  port: PORT
  reply_bytes: 92
  command: [nginx, -p, "{workdir}", -c, "{workdir}/nginx.conf", -e, "{workdir}/error.log"]
  files:
    nginx.conf: |
      daemon off;
      worker_processes 1;
      pid {workdir}/nginx.pid;
      error_log {workdir}/error.log;
      events {{ worker_connections 4096; }}
      http {{
        access_log off;
        client_body_temp_path {workdir}; proxy_temp_path {workdir};
        fastcgi_temp_path {workdir}; uwsgi_temp_path {workdir}; scgi_temp_path {workdir};
        server {{ listen {address}:{port}; location / {{ return 200 "{body}"; }} }}
      }}
hot: {generator: sclient, conns: 4, rate_rps: 300}
repetitions: 1
warmup_s: 0.3
duration_s: 1
"""


@pytest.mark.timing
def test_external_nginx_scenario_runs(tmp_path: Path, port: int):
    if shutil.which("nginx") is None:
        pytest.skip("nginx is not installed (apt-get install nginx-light)")
    # a relative results root: {workdir} must still reach nginx as an absolute path (nginx
    # reads a relative one from its own prefix)
    run, _ = run_scenario(tmp_path, NGINX.replace("PORT", str(port))
                          .replace('[nginx, -p, "{workdir}", ', "[nginx, "), relative_out=True)
    points = pd.read_parquet(run / "points.parquet")
    assert points.loc[0, "server"] == "nginx"
    reason = points.loc[0, "invalid_reason"]
    assert points.loc[0, "valid"] or "generator fell behind" in reason, reason
    assert 250 < points.loc[0, "reply_rate_rps"] < 350
    assert pd.isna(points.loc[0, "dispatch_calls"])  # nginx has no wb-server stats


def test_doctor_lists_every_capability():
    done = subprocess.run(WANBENCH + ["doctor"], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "COLUMNS": "200"})
    for name in ("network namespaces", "netem", "userspace link emulator",
                 "perf hardware counters", "perf record", "httperf", "wrk", "wrk2",
                 "RLIMIT_NOFILE", "RLIMIT_SIGPENDING", "io_uring", "somaxconn",
                 "ephemeral port range", "CPU steal now", "isolated CPUs",
                 "frequency governor", "network IRQ affinity", "kernel command line",
                 "kernels in guests"):
        assert name in done.stdout, name
    assert "KVM" in done.stdout or "TCG only" in done.stdout or "vng" in done.stdout
    assert done.returncode in (0, 1)


def test_doctor_json_is_the_same_checks_for_a_program():
    done = subprocess.run(WANBENCH + ["doctor", "--json"], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    report = json.loads(done.stdout)
    names = {check["name"] for check in report["checks"]}
    assert {"network namespaces", "netem (sch_netem)", "wrk2", "io_uring"} <= names
    assert {"kernel command line", "CPU steal now"} <= {s["name"] for s in
                                                         report["noise_sources"]}
    assert all({"ok", "detail", "fix", "essential"} <= set(c) for c in report["checks"])
    assert done.returncode == report["exit_status"] in (0, 1)


def test_doctor_folds_a_long_value_and_keeps_short_ones():
    from harness.commands.doctor import FOLD_CHARS, folded

    assert folded("quiet panic=1") == "quiet panic=1"
    long = "x=1 " * 200
    assert folded(long).startswith(long[:FOLD_CHARS] + "…")
    assert f"{len(long) - FOLD_CHARS:,} more characters: --json" in folded(long)


WAN = """
name: wan-smoke
topology: {file: topologies/dumbbell-wan.yaml, set: {links.cold.delay_ms: 20}}
server: {dispatch: epoll, reply_bytes: 92}
hot: {generator: sclient, conns: 4, rate_rps: 300}
cold: {conns: 200}
repetitions: 1
warmup_s: 0.5
duration_s: 1.5
"""


@pytest.mark.timing
@pytest.mark.skipif(os.geteuid() != 0, reason="namespace topologies need root")
def test_run_through_an_emulated_wan(tmp_path: Path):
    build("build/bin/wb-linkem")
    run, _ = run_scenario(tmp_path, WAN, timeout=180)
    manifest = json.loads((run / "manifest.json").read_text())
    topo = manifest["topology"]
    assert topo["backend"] in {backend.name for backend in AUTO_ORDER}  # what auto may pick
    (instance,) = topo["instances"]
    assert instance["set"] == {"links.cold.delay_ms": 20}
    assert instance["calibration"], "bring-up must record the calibration"
    points = pd.read_parquet(run / "points.parquet")
    if BACKENDS[topo["backend"]].binary is not None:  # wb-linkem, over AF_XDP or TUN
        assert instance["emulator_counters"], "counters are kept after teardown"
        assert points.loc[0, "cpu_emulator_pct"] > 0  # it forwarded every packet
    else:
        assert pd.isna(points.loc[0, "cpu_emulator_pct"])  # netem works in the kernel
    assert points.loc[0, "cold_held"] == 200
    assert 250 < points.loc[0, "reply_rate_rps"] < 350
    assert points.loc[0, "packets_in"] > 0  # counted inside the server's namespace
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert instance["prefix"] not in namespaces, "the run's namespaces must be gone"


STREAM = """
name: stream-smoke
topology: {file: topologies/loopback.yaml}
stream: {conns: 8, mbps: 50, sender: server}
repetitions: 1
warmup_s: 0.3
duration_s: 1.5
"""


@pytest.mark.timing
def test_stream_point_measures_throughput_and_has_no_request_columns(tmp_path: Path):
    """The server sends, as the cpp scenarios have it (a stream the generator sends to a
    --sink is tested at wb-sclient's level, tests/clients/test_sclient.py)."""
    run, stdout = run_scenario(tmp_path, STREAM)
    points = pd.read_parquet(run / "points.parquet")
    assert points.loc[0, "stream_conns"] == 8 and points.loc[0, "stream_mbps"] == 50
    assert 45 < points.loc[0, "stream_throughput_mbps"] < 55
    # Nothing was requested: null, never zero.
    assert pd.isna(points.loc[0, "reply_rate_rps"]) and pd.isna(points.loc[0, "hot_conns"])
    assert points.loc[0, "bytes_in"] > 0 and points.loc[0, "cycles_per_packet"] > 0
    stats = json.loads(next(run.glob("raw/*/server-stats.json")).read_text())
    sent, read = stats["bytes_out"], stats["bytes_in"]
    assert sent > 0 and read == 0
    assert "Mbit/s" in stdout


def test_rt_signal_queue_limit_makes_the_rtsig_server_overflow(tmp_path: Path):
    # the papers' kernels queued at most 1024 RT signals; with 16 slots, 100 busy connections
    # overflow the queue and the server falls back to its poll() rescan (Chandra Table 1)
    run, _ = run_scenario(tmp_path, """
name: rtsig-overflow
topology: {file: topologies/loopback.yaml}
server: {dispatch: rtsig, rt_signal_queue: 16}
hot: {generator: sclient, conns: 100}
sweep:
  server.rt_signal_queue: [16, null]
warmup_s: 0.2
duration_s: 1
""")
    points = pd.read_parquet(run / "points.parquet").set_index("point_id")
    assert len(points) == 2 and (points["reply_rate_rps"] > 0).all()
    by_limit = points.set_index("server_rt_signal_queue", drop=False)
    assert by_limit.loc[16, "sigio_overflows"] > 0 and by_limit.loc[16, "fallback_rescans"] > 0
    unlimited = points[points["server_rt_signal_queue"].isna()]
    assert (unlimited["sigio_overflows"] == 0).all()


BUSY_GENERATOR = """
name: busy-generator
topology: {file: topologies/loopback.yaml}
hot: {generator: sclient, conns: 20, rate_rps: 20000, spin_us: 1000}
repetitions: 1
warmup_s: 0.5
duration_s: 3
"""


@pytest.mark.timing
def test_the_window_counts_the_generators_cpu_to_its_end(tmp_path: Path):
    # with a lead of 1 ms over sends 50 us apart wb-sclient polls all the time: busy all of its
    # window, by its own count
    run, _ = run_scenario(tmp_path, BUSY_GENERATOR)
    point = pd.read_parquet(run / "points.parquet").iloc[0]
    (doc,) = [json.loads(d.read_text()) for d in (run / "raw").glob("*/hot.json")]
    own = doc["generator_cpu"]["pct"]
    # it wanted its CPU all along: ran, or waited for it while the rest of the suite ran there
    assert own + 100 * doc["generator_cpu"]["run_delay_s"] / doc["duration_s"] > 90, \
        doc["generator_cpu"]
    # the runner's sampler reads the same process over (almost) the same window
    assert point["cpu_generator_pct"] == pytest.approx(own, abs=10)
    # most of it polls that found nothing: idle time, not a saturated generator
    assert point["generator_idle_poll_pct"] > 20
    assert "generator CPU saturated" not in (point["invalid_reason"] or "")


WINDOWED = """
name: windowed
topology: {file: topologies/loopback.yaml}
server: {dispatch: epoll}
hot: {generator: sclient, conns: 4, rate_rps: 500}
repetitions: 1
warmup_s: 0.5
duration_s: 2
"""


def test_every_source_measured_the_runners_window(tmp_path: Path):
    """The generator counted exactly the runner's window; the server's stats and the samplers
    read at its edges, within the rule's 1 % of it (clients.validity window_disagrees)."""
    run, _ = run_scenario(tmp_path, WINDOWED)
    point = pd.read_parquet(run / "points.parquet").iloc[0]
    assert point["window_s"] == 2.0
    assert point["window_end_ns"] - point["window_start_ns"] == 2_000_000_000
    assert point["edge_generator_start_ms"] == point["edge_generator_end_ms"] == 0
    for source in ("server_stats", "sampler"):
        for edge in ("start", "end"):
            assert 0 <= point[f"edge_{source}_{edge}_ms"] <= 20, (source, edge, point)
    assert "window_disagrees" not in (point["invalid_codes"] or "")
    (doc,) = [json.loads(d.read_text()) for d in (run / "raw").glob("*/hot.json")]
    assert doc["window"] == {"start_ns": point["window_start_ns"],
                             "end_ns": point["window_end_ns"]}


HTTPERF = """
name: httperf-in-a-run
topology: {file: topologies/loopback.yaml}
server: {dispatch: epoll}
hot: {generator: httperf, conns: 10, rate_rps: 500}
repetitions: 1
warmup_s: 0.5
duration_s: 2
cpus: {server: 0, generator: 1}
"""


@pytest.mark.timing
@pytest.mark.skipif(shutil.which("httperf") is None, reason="httperf is not installed")
def test_httperf_polling_its_cpu_is_not_called_saturated(tmp_path: Path):
    run, _ = run_scenario(tmp_path, HTTPERF)
    point = pd.read_parquet(run / "points.parquet").iloc[0]
    # it polls: it wants its CPU all along, whatever the rate (ran, waited beside the suite, or
    # had its vCPU taken by the hypervisor: steal, which the guest sees as no one's run time)
    wanted = (point["cpu_generator_pct"] + point["generator_wait_pct"]
              + point["steal_generator_cpu_pct"])
    assert wanted > 90, point[["cpu_generator_pct", "generator_wait_pct",
                               "steal_generator_cpu_pct", "idle_generator_cpu_pct"]]
    assert "generator CPU saturated" not in (point["invalid_reason"] or ""), point


def test_doctor_says_netem_needs_another_kernel_where_no_module_can_load(tmp_path: Path):
    from harness.doctor import modules_unavailable

    cmdline, modules = tmp_path / "cmdline", tmp_path / "modules"
    (modules / os.uname().release).mkdir(parents=True)
    cmdline.write_text("console=ttyS0 quiet\n")
    assert modules_unavailable(cmdline, modules) is None
    cmdline.write_text("console=ttyS0 nomodule quiet\n")
    assert modules_unavailable(cmdline, modules) == "the kernel was booted with nomodule"
    cmdline.write_text("quiet\n")
    assert "no modules for this kernel" in modules_unavailable(cmdline, tmp_path / "none")


def test_doctor_netem_fix_names_the_fallback(monkeypatch: pytest.MonkeyPatch):
    from harness import doctor

    monkeypatch.setattr(doctor, "link_backend_here",
                        lambda: ("userspace", {"netem": {"ok": False, "error": "no qdisc"}}))
    monkeypatch.setattr(doctor, "modules_unavailable", lambda: "the kernel was booted with "
                                                               "nomodule")
    fix = doctor.check_netem().fix
    assert "nomodule" in fix and "another kernel" in fix and "wb-linkem" in fix
    assert "linux-modules-extra" not in fix
    monkeypatch.setattr(doctor, "modules_unavailable", lambda: None)
    fix = doctor.check_netem().fix
    assert fix.startswith("modprobe sch_netem") and "wb-linkem" in fix
