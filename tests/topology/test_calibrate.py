"""Calibration's verdicts on synthetic measurements: a correct link passes whatever the
machine's floor and its noise, a link whose delay is wrong is refused with the numbers and a
fix."""

from __future__ import annotations

import ipaddress

import pytest

from clients.targets import BENCHMARK_NET
from harness.topology import load_topology
from harness.topology.addressing import CALIBRATION_NET
from harness.topology.calibrate import (
    FLOOR_ADDRESSES,
    FLOOR_PREFIXLEN,
    Bounds,
    judge,
    rtt_tolerance_ms,
)
from tests.conftest import REPO

DUMBBELL = REPO / "topologies/dumbbell-wan.yaml"


def link(name: str, **overrides: str):
    topology = load_topology(DUMBBELL, {f"links.{name}.{k}": v for k, v in overrides.items()})
    return topology.links[name]


def floor(ms: float) -> dict:
    return {"ping_rtt_median_ms": ms, "connect_rtt_median_ms": ms, "path": "synthetic"}


def measured(ms: float, slow: int = 0, extra_ms: float = 3.9) -> dict:
    """20 pings and 5 connects of ms, the first `slow` of each kind extra_ms later."""
    def samples(n: int) -> list[float]:
        return [ms + extra_ms] * min(slow, n) + [ms] * max(n - slow, 0)
    return {"ping_ms": samples(20), "connect_ms": samples(5)}


def test_an_unshaped_link_at_the_machines_floor_is_accepted():
    # The refusal from the issue: hot 0.445 ms vs 0, on a machine whose floor is 0.43 ms.
    result = judge("hot", link("hot"), "userspace", measured(0.445), floor(0.43))
    assert result["problems"] == []
    assert result["floor"]["ping_rtt_median_ms"] == 0.43  # kept for the manifest
    assert result["upper_bound_on"] == "fastest probe"


def test_probes_the_machine_delayed_do_not_refuse_a_link():
    # A busy CPU holds an unshaped (SCHED_BATCH) link's wake-ups to its scheduler tick:
    # 4 ms at HZ=250 for most probes, while the floor path's threads ran elsewhere.
    result = judge("hot", link("hot"), "userspace", measured(0.02, slow=4), floor(0.02))
    assert result["ping_rtt_median_ms"] == pytest.approx(0.02)
    assert result["connect_rtt_median_ms"] == pytest.approx(3.92)
    assert result["problems"] == []


def test_a_delayed_link_may_add_the_floor_but_no_more():
    spec = link("cold", delay_ms="10")
    assert judge("cold", spec, "userspace", measured(20.9), floor(0.8))["problems"] == []
    problems = judge("cold", spec, "userspace", measured(21.3), floor(0.8))["problems"]
    assert len(problems) == 2  # ping and connect
    assert problems[0].startswith("link cold: ping RTT median 21.300 ms vs configured "
                                  "20.000 ms (fastest 21.300 ms; floor 0.800 ms")
    assert "tolerance ±0.200 ms" in problems[0]
    assert ("the fastest of 20 probes is above 21.000 ms, the link adds 0.500 ms beyond its "
            "configuration and the floor; fix:") in problems[0]


def test_a_link_with_less_delay_than_configured_is_refused_whatever_the_floor():
    # The lower bound stays tight: an emulator can add delay, never take it away.
    result = judge("cold", link("cold", delay_ms="10"), "userspace", measured(19.7), floor(5.0))
    assert len(result["problems"]) == 2
    assert "the median is below 19.800 ms, the link delays less than configured" in (
        result["problems"][0])


@pytest.mark.parametrize("wrong_ms", [5.0, 9.7, 10.4, 15.0, 30.0])
def test_a_link_with_the_wrong_delay_is_refused(wrong_ms):
    # Measurements of a link with wrong_ms each way, judged against 10 ms each way.
    result = judge("cold", link("cold", delay_ms="10"), "userspace",
                   measured(2 * wrong_ms + 0.05), floor(0.05))
    assert [p.split(":")[0] for p in result["problems"]] == ["link cold"] * 2


def test_bounds_name_every_number():
    bounds = Bounds(configured=10.0, floor=0.4, tolerance=0.2, jitters=False)
    assert bounds.problem("x", "ping", [10.5, 10.6]) is None
    message = bounds.problem("x", "connect", [10.7, 10.8, 10.9])
    for number in ("median 10.800", "configured 10.000", "fastest 10.700", "floor 0.400",
                   "±0.200", "above 10.600", "adds 0.300"):
        assert number in message


def test_a_jittering_link_is_judged_on_its_median_with_a_wider_tolerance():
    spec = link("cold", delay_ms="10", jitter_ms="4")
    result = judge("cold", spec, "userspace", measured(20.0), floor(0.1))
    assert result["upper_bound_on"] == "median"
    assert result["rtt_tolerance_ms"] == pytest.approx(
        rtt_tolerance_ms(20, (2 * 4**2 / 3) ** 0.5, 20))
    assert result["rtt_tolerance_ms"] > 0.2
    # Half the probes late by more than the floor and tolerance: the median shows it.
    refused = judge("cold", spec, "userspace", measured(20.0, slow=13, extra_ms=5), floor(0.1))
    assert "the median is above" in refused["problems"][0]


def test_the_floor_path_is_addressed_from_the_benchmarking_range():
    """Its namespaces are its own, but the README promises 198.18.0.0/15 for every address
    wanbench gives out, and the block is the addressing module's, not a literal here."""
    assert CALIBRATION_NET.subnet_of(BENCHMARK_NET)
    assert [ipaddress.ip_address(a) for a in FLOOR_ADDRESSES] == list(CALIBRATION_NET.hosts())
    assert FLOOR_PREFIXLEN == CALIBRATION_NET.prefixlen
