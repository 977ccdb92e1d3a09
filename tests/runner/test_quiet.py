"""Waiting for quiet measured CPUs before a repetition (harness/runner/quiet.py): a quiet
machine is found at once, a busy one waited for within the bound and then named."""

from __future__ import annotations

import asyncio

from harness.analysis.compare.compat import FREE_SCENARIO_FIELDS
from harness.runner import quiet
from harness.scenario import parse


def stat(ticks: dict[int, tuple[int, int]]) -> str:
    """/proc/stat text: per CPU (busy ticks as user, idle ticks)."""
    lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
    lines += [f"cpu{cpu} {busy} 0 0 {idle} 0 0 0 0 0 0" for cpu, (busy, idle) in ticks.items()]
    return "\n".join(lines) + "\nintr 1 2 3\n"


def readings(shares: list[float]) -> list[str]:
    """Two readings per probe: CPU 1 busy by each share of 100 ticks, CPU 0 idle."""
    out, busy, idle = [], 0, 0
    for share in shares:
        out.append(stat({0: (0, idle), 1: (busy, idle)}))
        busy, idle = busy + round(100 * share), idle + 100 - round(100 * share)
        out.append(stat({0: (0, idle + round(100 * share)), 1: (busy, idle)}))
    return out


def test_busy_and_idle_ticks_are_read_per_cpu():
    text = "cpu  9 9 9 9 9 9 9 9 0 0\ncpu0 1 2 3 100 4 5 6 7 0 0\ncpu1 0 0 0 10 0 0 0 0 0 0\n"
    assert quiet.cpu_times(text) == {0: (1 + 2 + 3 + 5 + 6 + 7, 128), 1: (0, 10)}


def test_a_quiet_machine_is_measured_at_once():
    found = asyncio.run(quiet.wait([0, 1], 10.0, probe_s=0.001,
                                   read=iter(readings([0.0])).__next__))
    assert found.quiet and found.busy == {0: 0.0, 1: 0.0}
    assert found.describe(10.0).startswith("waited ")
    assert found.describe(10.0).endswith(" s for the measured CPUs to be quiet (CPU 0 0%, "
                                         "CPU 1 0%)")


def test_a_neighbour_that_stops_is_waited_for():
    found = asyncio.run(quiet.wait([0, 1], 10.0, probe_s=0.001,
                                   read=iter(readings([0.5, 0.3, 0.0])).__next__))
    assert found.quiet and found.busy[1] == 0.0


def test_a_neighbour_that_does_not_stop_is_named_after_the_bound():
    found = asyncio.run(quiet.wait([0, 1], 0.05, probe_s=0.02,
                                   read=iter(readings([0.35] * 10)).__next__))
    assert not found.quiet and found.busy[1] == 0.35
    assert found.describe(0.05) == ("the measured CPUs were not quiet within 0.05 s (busy: "
                                    "CPU 0 0%, CPU 1 35%; quiet is at most 1%): measuring "
                                    "anyway")


def test_one_percent_is_quiet_two_are_not():
    """The bound is the late-sends limit: others' share of a window that spoils a point."""
    assert quiet.Quiet(0.0, {1: 0.01}).quiet and not quiet.Quiet(0.0, {1: 0.02}).quiet


def test_the_wait_is_a_scenario_field_that_does_not_change_the_experiment():
    assert parse("name: q\nquiet_wait_s: 30\n").quiet_wait_s == 30.0
    assert parse("name: q\n").quiet_wait_s == 0.0
    assert "quiet_wait_s" in FREE_SCENARIO_FIELDS  # compare: runs that waited and did not
