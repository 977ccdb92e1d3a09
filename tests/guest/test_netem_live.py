"""netem live, in a guest: Debian's 6.12 kernel boots under virtme-ng (TCG here) and
topologies/dumbbell-wan.yaml comes up with the netem backend inside it; the delay, loss,
rate and BDP-sized queue limit the kernel applies are checked against the topology.

Tolerances hold under TCG, where guest time runs unevenly: netem cannot deliver early, so
the lower bounds are tight, and the upper ones leave room for the emulated CPU's lateness.
- delay: fastest ICMP RTT >= configured - 0.5 ms; median <= configured + DELAY_SLACK_MS
  (400 pings 10 ms apart: measured under TCG, median 101-105 ms, mean up to 127 ms)
- loss: the share of pings lost within LOSS_POINTS of the configured rate (binomial,
  400 pings: sigma 2 points, so the band is 5 sigma)
- rate: TCP goodput each way <= 105 % of what the rate carries, >= RATE_FLOOR of it
- queue limit: exactly 1.5 x BDP in 1,500-byte packets, as the kernel reports it (tc -j)
"""

from __future__ import annotations

import math

import pytest

from harness.topology.calibrate import expected_goodput_bps
from tests.guest.conftest import measured_part

DELAY_SLACK_MS = 20.0
LOSS_POINTS = 10.0
RATE_FLOOR = 0.5

pytestmark = [pytest.mark.slow, pytest.mark.guest, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def measured(kernel_6_12_measured):
    measured = measured_part(kernel_6_12_measured, "netem.json")
    print("cold ping:", measured["cold_ping"], "hot goodput bps:", measured["hot_upload_bps"],
          measured["hot_download_bps"])
    return measured


def test_backend_is_netem(measured):
    assert measured["backend"] == "netem"


def test_delay(measured):
    configured = measured["manifest_links"]["cold"]["configured_rtt_ms"]
    assert configured == 100
    ping = measured["cold_ping"]
    assert ping["rtt_min_ms"] >= configured - 0.5
    assert ping["rtt_median_ms"] <= configured + DELAY_SLACK_MS


def test_loss(measured):
    ping = measured["cold_ping"]
    lost_pct = 100 * (1 - ping["received"] / ping["sent"])
    assert abs(lost_pct - 20) <= LOSS_POINTS, ping


@pytest.mark.parametrize("direction", ["hot_upload_bps", "hot_download_bps"])
def test_rate(measured, direction):
    expected = expected_goodput_bps(8, "netem")
    assert RATE_FLOOR * expected <= measured[direction] <= 1.05 * expected


def test_queue_limit_is_bdp_sized(measured):
    cold = measured["qdiscs"]["cold"]
    bdp_packets = 240e6 * 0.100 / (8 * 1500)  # rate x the link's round trip, in packets
    for direction in ("a_to_b", "b_to_a"):
        assert cold[direction]["options"]["limit"] == math.ceil(1.5 * bdp_packets) == 3000
    # no delay on hot: its round trip holds nothing, so the floor of 1,000 packets stands
    assert measured["qdiscs"]["hot"]["a_to_b"]["options"]["limit"] == 1000
    assert cold["b_to_a"]["options"]["loss-random"]["loss"] == pytest.approx(0.2)
