"""`kernel_trace: true` in a run: each point's window traced, its kernel columns filled; where
BPF cannot run the run completes all the same, the columns null, and it says why once."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from clients.paths import BIN_DIR
from harness.metrics import ktrace
from harness.results.format import KERNEL_FUNCTIONS, KERNEL_TRACE_COLUMNS, kernel_function_column
from tests.conftest import REPO, build

SCENARIO = """
name: ktrace-smoke
topology: {file: topologies/loopback.yaml}
server: {dispatch: select, reply_bytes: 92}
hot: {generator: sclient, conns: 4, rate_rps: 500}
cold: {conns: 300, ramp_rps: 5000}
repetitions: 1
warmup_s: 0.3
duration_s: 1
"""


@pytest.fixture(scope="module", autouse=True)
def binaries():
    build("build/bin/wb-server")
    build("build/bin/wb-sclient")


def run(tmp_path: Path, text: str, env: dict[str, str] | None = None
        ) -> tuple[pd.DataFrame, dict, str]:
    """Points, manifest and what the run printed; its exit status says its points' validity."""
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(text)
    out = tmp_path / "results"
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(scenario), "--out",
                           str(out)], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "300", **(env or {})})
    (run_dir,) = [p.parent for p in out.glob("*/*/manifest.json")]
    points = pd.read_parquet(run_dir / "points.parquet")
    assert done.returncode == (0 if points["valid"].all() else 1), done.stderr[-2000:]
    return points, json.loads((run_dir / "manifest.json").read_text()), done.stdout + done.stderr


def test_a_traced_point_has_its_kernel_columns_and_an_untraced_one_has_them_null(
        tmp_path: Path, ktrace_bin: Path):
    points, manifest, printed = run(tmp_path, SCENARIO + "sweep: {kernel_trace: [false, true]}\n")
    assert manifest["kernel_trace"]["tracepoints"] is True
    # what function grain this machine gives is said once (the two points share it)
    assert printed.count("kernel_trace: ") == 1
    traced = points[points["kernel_trace"]].iloc[0]
    untraced = points[~points["kernel_trace"]].iloc[0]
    assert untraced[list(KERNEL_TRACE_COLUMNS)].isna().all()
    for family in ("select", "read", "write"):
        assert traced[f"kernel_{family}_calls"] > 0, family
        assert traced[f"kernel_{family}_ns_per_call"] > 0, family
        assert traced[f"kernel_{family}_ns_per_reply"] > 0, family
    assert traced["kernel_epoll_wait_calls"] == 0  # a select server
    assert traced["kernel_rx_packets"] > 0 and traced["kernel_events_traced"] > 0
    # 300 idle descriptors in each select: the ready ones are a few of them
    assert 0 < traced["kernel_select_ready_per_call"] < 300
    # traced over the samplers' window, give or take their own start and stop
    assert abs(traced["kernel_trace_window_s"] - traced["sampled_window_s"]) < 0.1
    # the run's table shows the in-kernel time per dispatch call: the traced point's, and a
    # dash for the untraced one
    header = next(line for line in printed.splitlines() if "kernel/call" in line)
    assert header.index("kernel/call") > header.index("CPU %")
    rows = {line.split()[0]: line for line in printed.splitlines()
            if line.split()[:1] in (["True"], ["False"])}
    assert "—" in rows["False"]
    def times(row: str) -> int:  # p50, p99 and, when traced, kernel/call
        return len(re.findall(r"\d (?:ns|µs|ms|s)\b", row))
    assert (times(rows["True"]), times(rows["False"])) == (3, 2)


def test_where_fentry_is_refused_the_function_columns_are_null_and_the_run_says_why_once(
        tmp_path: Path, ktrace_bin: Path):
    if ktrace.support().fentry:
        pytest.skip("fentry works here: tests/guest/test_ktrace_functions.py times functions")
    points, manifest, said = run(tmp_path, SCENARIO + "kernel_trace: true\n")
    function_columns = [kernel_function_column(f, m) for f in KERNEL_FUNCTIONS
                        for m in ("calls", "ns_per_call", "ns_per_packet")]
    assert points[function_columns].isna().all().all()
    assert points["kernel_select_calls"].gt(0).all()  # the layers are measured all the same
    assert manifest["kernel_trace"]["fentry"] is False
    assert said.count("kernel_trace: no function grain: fentry refused (loading an fentry "
                      "program on do_select: Operation not permitted)") == 1
    assert "measured at layer grain" in said


@pytest.mark.skipif(shutil.which("capsh") is None or os.geteuid() != 0,
                    reason="needs root and capsh (libcap2-bin) to drop capabilities")
def test_where_bpf_cannot_run_the_run_completes_with_null_columns_and_says_why_once(
        tmp_path: Path, ktrace_built: Path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("wb-server", "wb-sclient"):
        (bin_dir / name).symlink_to(BIN_DIR / name)
    # the loader without CAP_BPF and CAP_SYS_ADMIN, everything else as it was
    wrapper = bin_dir / "wb-ktrace"
    wrapper.write_text(f"#!/bin/sh\nexec capsh --drop=cap_bpf,cap_sys_admin -- "
                       f"-c 'exec \"$0\" \"$@\"' {ktrace_built} \"$@\"\n")
    wrapper.chmod(0o755)
    points, manifest, said = run(tmp_path, SCENARIO + "kernel_trace: true\n",
                                 {"WANBENCH_BIN": str(bin_dir)})
    assert points[list(KERNEL_TRACE_COLUMNS)].isna().all().all()
    assert manifest["kernel_trace"]["tracepoints"] is False
    assert "CAP_BPF" in manifest["kernel_trace"]["detail"]
    assert said.count("kernel_trace cannot run here") == 1
    assert "fix: run as root" in said


def test_a_server_tracer_slower_to_load_than_the_warm_up_delays_the_window_not_its_start(
        tmp_path: Path, ktrace_bin: Path):
    """Before: the window was decided before the server's tracer loaded, and a loader slower
    than the warm-up (the reference's cpp Fig 4, 0.5 s) counted from up to 716 ms into it:
    the point was invalid (window_disagrees). Now the tracers load first."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("wb-server", "wb-sclient"):
        (bin_dir / name).symlink_to(BIN_DIR / name)
    # the server's call timer (--pid) loads 1.5 s late; its probe and who-ran as they are
    wrapper = bin_dir / "wb-ktrace"
    wrapper.write_text(f'#!/bin/sh\n[ "$1" = --pid ] && sleep 1.5\nexec {ktrace_bin} "$@"\n')
    wrapper.chmod(0o755)
    points, _, _ = run(tmp_path, SCENARIO + "kernel_trace: true\n",
                       {"WANBENCH_BIN": str(bin_dir)})
    traced = points.iloc[0]
    assert "window_disagrees" not in str(traced["invalid_codes"]), traced["invalid_reason"]
    assert traced["kernel_select_calls"] > 0
    # its edges are the window's, give or take the tracer's own wake-up (the rule allows 1 %)
    assert abs(traced["edge_kernel_trace_start_ms"]) < 10
    assert abs(traced["edge_kernel_trace_end_ms"]) < 10
