"""Late sends judged from real runs: a task holding the generator's CPU makes them interference
(measured again), a generator offered more than it can send keeps them its own. The wait
behind other tasks is traced (wb-whoran) where the machine allows it."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest

from clients import validity
from harness.metrics import ktrace, whoran
from tests.conftest import STALLER, build
from tests.runner.test_interference import POINT, _run

# measured once: a point whose reasons are all interference stays as it was measured
ONCE = POINT + "interference_retries: 0\n"


@pytest.fixture(scope="module", autouse=True)
def traced() -> None:
    build("build/bin/wb-server")
    build("build/bin/wb-sclient")
    if ktrace.VMLINUX_BTF.exists():
        build("build/bin/wb-whoran")
    whoran.cannot_run.cache_clear()
    if (why := whoran.cannot_run()) is not None:
        pytest.skip(f"the generator's CPU cannot be traced here: {why}")


def _stalled(tmp_path: Path, text: str) -> pd.Series:
    """The point of text with a real-time task holding the generator's CPU (1) 5 ms in every
    50 from a second in: once the generator runs, its warm-up and start-up first."""
    stallers: list[subprocess.Popen] = []

    def start() -> None:
        stallers.append(subprocess.Popen(["chrt", "-f", "10", "taskset", "-c", "1",
                                          sys.executable, "-c", STALLER]))

    timer = threading.Timer(1.0, start)
    timer.start()
    try:
        return _run(tmp_path, text).iloc[0]
    finally:
        timer.cancel()
        for staller in stallers:
            staller.kill()
            staller.wait()


def test_a_task_holding_the_generators_cpu_makes_late_sends_interference(tmp_path: Path):
    point = _stalled(tmp_path, ONCE)
    seen = point[["late_sends", "generator_wait_pct", "generator_wait_others_pct",
                  "other_generator_cpu_pct", "other_generator_tasks", "invalid_reason"]]
    assert point["other_generator_measure"] == "traced"
    # 5 ms stalls every 50 ms: sends due in a stall's last 4 ms go out over 1 ms late
    assert point["generator_wait_others_pct"] > 100 * validity.LATE_LIMIT, seen
    assert "python" in point["other_generator_tasks"], seen
    assert not point["valid"], seen
    assert "generator_crowded" in point["invalid_codes"].split(","), seen
    assert "late_sends" not in point["invalid_codes"].split(","), seen
    assert point["interference_only"], seen  # measured again under interference_retries


@pytest.mark.timing
def test_a_task_holding_the_generators_cpu_in_a_closed_loop_is_interference(tmp_path: Path):
    """One connection, one request at a time: the round trip, not the server, sets the rate
    (closed_loop_elsewhere, the set-up's: test_interference). A real-time task holding the
    generator's CPU 5 ms in every 50 keeps the loop from sending: a neighbour's doing,
    measured again."""
    point = _stalled(tmp_path, ONCE.replace("conns: 4, rate_rps: 4000", "conns: 1"))
    seen = str(point[["cpu_server_pct", "generator_wait_pct", "generator_wait_others_pct",
                      "other_generator_cpu_pct", "other_generator_tasks",
                      "invalid_reason"]].to_dict())
    assert point["other_generator_measure"] == "traced"
    # 5 ms stalls every 50 ms: its reply comes in each, and its wait behind it is 4 ms past
    # the 1 ms threshold: 8 %
    assert point["generator_wait_others_pct"] > validity.WAIT_LIMIT_PCT, seen
    assert not point["valid"], seen
    # beside the suite others may crowd the server too: interference as well
    codes = point["invalid_codes"].split(",")
    assert "closed_loop_crowded" in codes and "closed_loop_elsewhere" not in codes, seen
    assert point["interference_only"], seen  # measured again under interference_retries


def test_a_generator_offered_more_than_it_can_send_keeps_its_late_sends(tmp_path: Path):
    """400,000 requests a second from one CPU: far past what wb-sclient sends (about 100,000
    here), so it falls behind by itself whoever else runs: its own fault, never measured
    again, though the suite's neighbours may hold its CPU too."""
    point = _run(tmp_path, ONCE.replace("conns: 4, rate_rps: 4000",
                                        "conns: 50, rate_rps: 400000")).iloc[0]
    seen = point[["late_sends", "cpu_generator_pct", "generator_wait_pct",
                  "generator_wait_others_pct", "steal_generator_cpu_pct",
                  "other_generator_tasks", "invalid_reason"]]
    assert point["other_generator_measure"] == "traced"
    assert not point["valid"], seen
    codes = point["invalid_codes"].split(",")
    assert "generator_saturated" in codes, seen
    assert not point["interference_only"], seen
    # the late-sends rule fires only past its limit (a saturated loop may queue and drop its
    # sends instead of sending them late: 0 late once in the suite); when it fires, the late
    # sends are its own unless others (tasks, the hypervisor) held its CPU past the limit
    if {"late_sends", "generator_crowded"} & set(codes):
        held = (min(point["generator_wait_others_pct"], point["generator_wait_pct"])
                + point["steal_generator_cpu_pct"])
        crowded = held > 100 * validity.LATE_LIMIT
        assert ("generator_crowded" in codes) == crowded, seen
        assert ("late_sends" in codes) != crowded, seen
