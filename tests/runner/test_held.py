"""hold_server_across_hot: points of a round that differ only in their hot load run on one
server and its cold connections, each still measured on its own; a failed point, the run's
end and a stop signal stop what is held; the order it needs, and the refusal of the others."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from harness.runner.run import pending
from harness.scenario import ScenarioError, parse
from tests.conftest import REPO, build, not_a_busy_machine
from tests.runner.test_lifecycle import _wait, _wb_server_of
from tests.runner.test_run import (
    WANBENCH,
    _start,
    _wait_for_records,
    leftover_processes,
    run_dirs,
    run_scenario,
    write_scenario,
)

COLD = 200


@pytest.fixture(scope="module", autouse=True)
def binaries():
    build("build/bin/wb-server")
    build("build/bin/wb-sclient")


def rates(hold: bool, levels: tuple[int, ...] = (300, 600), duration_s: float = 1) -> str:
    return f"""
name: held
topology: {{file: topologies/loopback.yaml}}
hot: {{generator: sclient, conns: 4, rate_rps: 300}}
cold: {{conns: {COLD}, ramp_rps: 5000}}
hold_server_across_hot: {str(hold).lower()}
sweep:
  hot.rate_rps: {list(levels)}
repetitions: 1
warmup_s: 0.3
duration_s: {duration_s}
"""


def _launched(run: Path, flag: str) -> int:
    """How many processes the run launched with flag in their argv (every argv.txt)."""
    return sum(any(arg == flag or arg.endswith("/" + flag) for arg in json.loads(line))
               for raw in (run / "raw").iterdir()
               for line in (raw / "argv.txt").read_text().splitlines())


def _points(run: Path) -> pd.DataFrame:
    return pd.read_parquet(run / "points.parquet").sort_values("offered_rate_rps")


@pytest.mark.parametrize("hold", [True, False])
def test_a_rate_sweep_runs_on_one_server_only_when_held(tmp_path: Path, hold: bool):
    run, _ = run_scenario(tmp_path, rates(hold))
    points = _points(run)
    assert points["server_carried_over"].tolist() == ([False, True] if hold else [False, False])
    assert not_a_busy_machine(points) == []
    assert (points["cold_held"] == COLD).all()  # counted from the kept generator's sockets too
    assert _launched(run, "wb-server") == (1 if hold else 2)
    assert _launched(run, "--cold") == (1 if hold else 2), "a cold generator per server"
    assert all((raw / "hot.json").is_file() for raw in (run / "raw").iterdir())


def test_a_point_whose_server_dies_ends_the_holding(tmp_path: Path):
    out = tmp_path / "results"
    proc = _start(["run", str(write_scenario(tmp_path, rates(True, (300, 600), 3))),
                   "--out", str(out)])
    _wait(lambda: list(out.glob("*/*/raw/*/hot.stderr")), 30, "no hot generator started")
    time.sleep(1.0)
    os.kill(_wait(lambda: _wb_server_of(out), 5, "no wb-server"), signal.SIGKILL)
    _, stderr = proc.communicate(timeout=120)
    assert "Traceback" not in stderr, stderr
    (run,) = run_dirs(out)
    first, second = (row for _, row in _points(run).iterrows())
    assert not first["valid"] and "the server exited" in first["invalid_reason"]
    assert not second["server_carried_over"], "the next point starts a server of its own"
    assert second["reply_rate_rps"] > 0 and second["cold_held"] == COLD
    assert _launched(run, "wb-server") == 2
    assert not leftover_processes(out)


def test_a_stop_signal_on_a_carried_point_leaves_nothing_running(tmp_path: Path):
    out = tmp_path / "results"
    proc = _start(["run", str(write_scenario(tmp_path, rates(True, (300, 400, 500), 2))),
                   "--out", str(out)])
    _wait_for_records(out, 1)
    time.sleep(0.5)  # in the second point's warm-up or window, on the first's server
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 143
    assert not leftover_processes(out)


SHARED = """
name: shared
hot: {conns: 2}
cold: {conns: 10}
hold_server_across_hot: true
sweep:
  hot.rate_rps: [100, 200]
  cold.conns: [10, 20]
repetitions: 2
"""


def test_points_sharing_a_server_run_together_hot_levels_in_the_sweeps_order():
    order = [(p.axis_values["cold.conns"], p.axis_values["hot.rate_rps"], rep)
             for p, rep in pending(parse(SHARED), set())]
    assert order == [(10, 100, 0), (10, 200, 0), (20, 100, 0), (20, 200, 0),
                     (10, 100, 1), (10, 200, 1), (20, 100, 1), (20, 200, 1)]
    unheld = SHARED.replace("hold_server_across_hot: true", "")
    assert [p.axis_values["cold.conns"] for p, _ in pending(parse(unheld), set())][:2] == \
        [10, 20], "without it the sweep's own order stands"


@pytest.mark.parametrize("order", ["shuffled", "grouped"])
def test_holding_is_refused_where_the_order_would_never_share(tmp_path: Path, order: str):
    with pytest.raises(ScenarioError, match=f"hold_server_across_hot.*order: {order}"):
        parse(SHARED + f"order: {order}\n")
    done = subprocess.run(WANBENCH + ["run", str(write_scenario(tmp_path, SHARED +
                                                                f"order: {order}\n")),
                                      "--out", str(tmp_path / "results")],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "order: interleaved" in done.stderr, done.stderr
