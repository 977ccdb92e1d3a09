"""The findings beyond the papers say where a curve bends on data that bends, and that it does
not on flat data; no paper claim reads a dispatch series it does not name."""

from __future__ import annotations

import json

import pytest

from harness.reproduce import beyond, claims
from harness.reproduce.verdict import Measured, Status, Unmeasured, evaluate_claim
from harness.results.runset import read_runs
from harness.scenario import load
from harness.scenario import points as grid
from tests.conftest import REPO

from ..analysis.synthetic import make_points, write_run
from .test_claims import as_read, points

CONNS = (4, 2048, 16384, 131072)
COLD = (0, 5000, 10000, 15000, 19900)


def stack_sweep(ns_per_packet: list[float]) -> Measured:
    """Stream points whose only traced layer is the receive softirq: the stack's ns per
    packet (derive.KERNEL_STACK) is that layer's."""
    return as_read(points([
        {"stream_conns": conns, "packets_in": 20_000, "packets_out": 20_000,
         "kernel_read_calls": 0, "kernel_read_ns_per_call": 0.0, "kernel_write_calls": 0,
         "kernel_write_ns_per_call": 0.0, "kernel_server_cpu_tx_packets": 0,
         "kernel_server_cpu_rx_ns_per_packet": ns}
        for conns, ns in zip(CONNS, ns_per_packet, strict=True)]))


def cold_sweep(epoll_rates: list[float]) -> Measured:
    rows = [{"dispatch": "epoll", "cold_conns": c, "reply_rate_rps": r}
            for c, r in zip(COLD, epoll_rates, strict=True)]
    return as_read(points(rows, repetitions=2))


def test_a_rising_stack_is_reported_rising_at_the_level_it_rises():
    text = beyond.connection_state_rise(stack_sweep([1000, 1050, 1300, 1400]), 260 * 2**20)
    assert "from 4 to 131,072 connections: ×1.4" in text
    state = 16384 * beyond.CONN_STATE_BYTES / 2**20
    assert (f"rises past 10% first at 16,384 connections ({state:,.0f} MiB of connection "
            f"state at the server, {state / 260:.2g}× the 260 MiB last-level cache)") in text


def test_a_flat_stack_is_reported_flat_up_to_the_last_level():
    text = beyond.connection_state_rise(stack_sweep([1000, 1050, 960, 1080]), 260 * 2**20)
    assert "no rise past 10% up to 131,072 connections" in text
    assert "rises" not in text
    assert "the last-level cache not recorded" in beyond.connection_state_rise(
        stack_sweep([1000, 1050, 960, 1080]), None)


def test_the_bend_is_the_first_level_outside_the_band_either_way():
    falling = beyond.bend(cold_sweep([10_000, 9_800, 9_500, 8_500, 7_000]), "reply_rate_rps",
                          "cold_conns", "fall", dispatch="epoll")
    assert falling.at == 15000 and falling.within_up_to() == 10000
    assert falling.ratios[19900] == pytest.approx(0.7)
    # a rise is not a fall, and a fall is not a rise
    assert beyond.bend(cold_sweep([10_000, 12_000, 13_000, 14_000, 15_000]), "reply_rate_rps",
                       "cold_conns", "fall", dispatch="epoll").at is None
    assert beyond.bend(cold_sweep([10_000, 9_800, 9_500, 8_500, 7_000]), "reply_rate_rps",
                       "cold_conns", "rise", dispatch="epoll").at is None


def test_epolls_cold_curve_bends_where_it_leaves_the_band_or_not_at_all():
    bent = beyond.cold_bend(cold_sweep([10_000, 9_800, 9_500, 8_500, 7_000]))
    assert "stays within 10% of its rate at 0 cold up to 10,000, then falls at 15,000 (0.85×)" \
        in bent
    flat = beyond.cold_bend(cold_sweep([10_000, 9_800, 9_500, 9_300, 9_200]))
    assert "does not fall by 10% up to 19,900 cold connections (the sweep's last level)" in flat


def test_a_bend_is_read_from_the_lowest_level_and_names_the_levels_it_lacks():
    rows = points([{"dispatch": "epoll", "cold_conns": c, "reply_rate_rps": 1.0}
                   for c in (0, 5000, 10000)])
    rows.loc[rows["cold_conns"] == 5000, "valid"] = False
    curve = beyond.bend(as_read(rows), "reply_rate_rps", "cold_conns", "fall")
    assert curve.ratios == {0: 1.0, 10000: 1.0} and curve.unmeasured == (5000,)
    assert curve.curve() == "0: 1, 10,000: 1 (no valid point at 5,000)"
    # no valid reference: unmeasured, not a curve from the next level up
    rows["valid"] = rows["cold_conns"] != 0
    with pytest.raises(Unmeasured, match="cold_conns=0: all 3 record"):
        beyond.cold_bend(as_read(rows))
    with pytest.raises(Unmeasured, match="no valid level beside 0"):
        beyond.cold_bend(as_read(points([{"dispatch": "epoll", "cold_conns": 0,
                                          "reply_rate_rps": 1.0}])))


# Each io_uring sweep and the paper's scenario whose conditions it keeps
URING_BESIDE = {beyond.URING_COLD_SCENARIO: "bmd99-fig8-reply-rate-vs-cold",
                beyond.URING_RATE_SCENARIO: "bmd99-fig9-resp-time-vs-rate",
                beyond.URING_CONNS_SCENARIO: "cm01-fig3-5-vs-connections"}


def _conditions(name: str) -> set[str]:
    """A scenario's points as they run, but for the mechanism and the rounds: what an io_uring
    sweep must share with its paper's scenario to sit beside its curves."""
    out = set()
    for point in grid(load(REPO / "scenarios" / f"{name}.yaml")):
        config = point.config.model_dump(mode="json",
                                         exclude={"name", "description", "repetitions"})
        config["server"].pop("dispatch")
        out.add(json.dumps(config, sort_keys=True))
    return out


@pytest.mark.parametrize("sweep", sorted(URING_BESIDE))
def test_each_uring_sweep_keeps_its_papers_conditions(sweep):
    assert _conditions(sweep) == _conditions(URING_BESIDE[sweep])
    assert {p.columns["dispatch"] for p in grid(load(REPO / "scenarios" / f"{sweep}.yaml"))} \
        == {beyond.URING, beyond.EPOLL}


def test_paper_claims_ignore_the_uring_series():
    """An io_uring series that would break every paper shape leaves the verdicts as they are."""
    rows = [{"dispatch": d, "cold_conns": c, "reply_rate_rps": r, "cpu_server_pct": 99.0}
            for d, c, r in (("select", 0, 50_000), ("select", 2000, 20_000),
                            ("epoll", 0, 50_000), ("epoll", 2000, 49_000))]
    wild = [{"dispatch": "uring", "cold_conns": c, "reply_rate_rps": r, "cpu_server_pct": 99.0}
            for c, r in ((0, 1_000), (500, 90_000), (2000, 10))]
    for target in ("bmd99-fig8", "bm98-fig9"):
        plain = [evaluate_claim(c, as_read(points(rows)), None) for c in claims.CLAIMS[target]]
        mixed = [evaluate_claim(c, as_read(points(rows + wild)), None)
                 for c in claims.CLAIMS[target]]
        assert [(r.status, r.detail) for r in mixed] == [(r.status, r.detail) for r in plain]
        assert all(r.status == Status.PASS for r in mixed)


def test_findings_without_runs_say_so():
    found = beyond.findings(None)
    # every scenario `make beyond` runs has a finding, and no finding reads another
    assert list(dict.fromkeys(f.scenario for f in found)) == list(beyond.SCENARIOS)
    assert all(f.run is None and f.text == f"no run of {f.scenario}" for f in found)
    text = beyond.markdown(found)
    assert text.startswith("Beyond the papers: no paper makes these claims")
    assert "- **BM98 Fig 9 past 2000 cold connections" in text
    assert "- **io_uring beside epoll on BMD99 Fig 8's axis" in text


COLD_FIG8 = (0, 500, 1000, 2000)


def uring_cold_sweep(epoll_rates: list[float], uring_rates: list[float],
                     repetitions: int = 2) -> Measured:
    """BMD99 Fig 8's axis: epoll's and io_uring's reply rates at each cold count."""
    rows = [{"dispatch": dispatch, "cold_conns": cold, "reply_rate_rps": rate}
            for dispatch, rates in (("epoll", epoll_rates), ("uring", uring_rates))
            for cold, rate in zip(COLD_FIG8, rates, strict=True)]
    return as_read(points(rows, repetitions=repetitions))


def test_uring_over_epoll_says_where_it_is_above_below_or_level():
    above = beyond.uring_over_epoll(
        uring_cold_sweep([20_000] * 4, [24_000, 20_500, 17_000, 16_000]),
        "reply_rate_rps", "cold_conns", "reply rate")
    assert above.startswith("io_uring's reply rate / epoll's at each cold count: "
                            "0: 1.2, 500: 1.02, 1,000: 0.85, 2,000: 0.8; ")
    assert above.endswith("above by more than 10% at 0; below by more than 10% at 1,000, "
                          "2,000; within 10% at 500")
    level = beyond.uring_over_epoll(
        uring_cold_sweep([20_000] * 4, [21_000, 19_000, 20_000, 20_400]),
        "reply_rate_rps", "cold_conns", "reply rate")
    assert level.endswith("within 10% in every round at every level measured")
    assert "above" not in level and "below" not in level


def test_rounds_that_disagree_are_shown_and_not_taken_for_a_side():
    frame = points([{"dispatch": d, "cold_conns": c, "reply_rate_rps": 10_000.0}
                    for d in ("epoll", "uring") for c in (0, 500)], repetitions=2)
    uring = frame["dispatch"] == "uring"
    # at 0 cold io_uring is 30 % above epoll in one round and 30 % below in the other
    frame.loc[uring & (frame["cold_conns"] == 0), "reply_rate_rps"] = [13_000.0, 7_000.0]
    # at 500 it is above in both rounds, by 20 % and 40 %
    frame.loc[uring & (frame["cold_conns"] == 500), "reply_rate_rps"] = [12_000.0, 14_000.0]
    text = beyond.uring_over_epoll(as_read(frame), "reply_rate_rps", "cold_conns",
                                   "reply rate")
    assert text == ("io_uring's reply rate / epoll's at each cold count: 0: 1 (rounds "
                    "0.7-1.3), 500: 1.3 (rounds 1.2-1.4); above by more than 10% at 500; "
                    "the rounds disagree at 0")


def test_uring_over_epoll_is_read_within_rounds_and_names_levels_it_lacks():
    frame = points([{"dispatch": d, "cold_conns": c, "reply_rate_rps": r}
                    for d, c, r in (("epoll", 0, 10_000), ("uring", 0, 11_000),
                                    ("epoll", 500, 10_000), ("uring", 500, 11_000))],
                   repetitions=2)
    # round 1 ran twice as fast for both: the ratio within each round is 1.1 either way
    frame.loc[frame["repetition"] == 1, "reply_rate_rps"] *= 2
    # epoll at 500 invalid in both rounds: nothing to read io_uring's 500 against
    frame.loc[(frame["dispatch"] == "epoll") & (frame["cold_conns"] == 500), "valid"] = False
    ratios = beyond.beside(as_read(frame), "reply_rate_rps", "cold_conns")
    assert ratios.ratios == {0: pytest.approx(1.1)} and ratios.unmeasured == (500,)
    assert ratios.curve() == "0: 1.1 (no valid point at 500)"
    # a ratio left with one round says so
    frame.loc[(frame["dispatch"] == "uring") & (frame["repetition"] == 1), "valid"] = False
    ratios = beyond.beside(as_read(frame), "reply_rate_rps", "cold_conns")
    assert ratios.curve() == "0: 1.1 (1 round) (no valid point at 500)"
    frame["valid"] = frame["dispatch"] == "uring"
    with pytest.raises(Unmeasured, match="no round measured uring and epoll validly"):
        beyond.beside(as_read(frame), "reply_rate_rps", "cold_conns")


def test_urings_cold_curve_is_level_or_leaves_the_band_either_way():
    flat = beyond.uring_cold_band(uring_cold_sweep([20_000] * 4, [20_000, 19_000, 21_000,
                                                                  18_500]))
    assert flat.startswith("io_uring's reply rate stays within the 10% band around its rate "
                           "at 0 cold at every level measured, up to 2,000. Each "
                           "level / the lowest: 0: 1, 500: 0.95, 1,000: 1.05, 2,000: 0.925")
    falls = beyond.uring_cold_band(uring_cold_sweep([20_000] * 4, [20_000, 19_000, 17_000,
                                                                   15_000]))
    assert falls.startswith("io_uring's reply rate leaves the 10% band around its rate at 0 "
                            "cold at 1,000 (0.85×), within it up to 500. Each level / the "
                            "lowest: ")
    rises = beyond.uring_cold_band(uring_cold_sweep([20_000] * 4, [20_000, 23_000, 24_000,
                                                                   24_000]))
    assert "leaves the 10% band around its rate at 0 cold at 500 (1.15×). Each" in rises
    # epoll's curve is not io_uring's: a falling epoll leaves a flat io_uring flat
    assert "at every level measured, up to 2,000" in beyond.uring_cold_band(
        uring_cold_sweep([20_000, 15_000, 10_000, 5_000], [20_000] * 4))


def conns_sweep(cpu: dict[str, dict[int, list[float]]]) -> Measured:
    """CM01 Figs 3-5's axis: server CPU of each dispatch at each rate and connection count."""
    rows = [{"dispatch": dispatch, "offered_rate_rps": rate, "hot_conns": conns,
             "cold_conns": 0, "cpu_server_pct": pct}
            for dispatch, by_rate in cpu.items() for rate, pcts in by_rate.items()
            for conns, pct in zip((250, 1500, 3000), pcts, strict=True)]
    return as_read(points(rows, repetitions=2))


def test_each_rate_reads_each_rate_on_its_own():
    m = conns_sweep({"epoll": {500: [2.0, 2.0, 2.0], 1000: [4.0, 4.0, 4.0]},
                     "uring": {500: [2.0, 2.1, 2.0], 1000: [3.0, 3.2, 3.0]}})
    text = beyond.each_rate(m, lambda **rate: beyond.uring_over_epoll(
        m, "cpu_server_pct", "total_conns", "server CPU", **rate))
    at_500, at_1000 = text.split("; at ")
    assert at_500 == ("at 500 req/s, io_uring's server CPU / epoll's at each connection "
                      "count: 250: 1, 1,500: 1.05, 3,000: 1; within 10% in every round at "
                      "every level measured")
    assert at_1000.startswith("1,000 req/s, io_uring's server CPU / epoll's at each "
                              "connection count: 250: 0.75, 1,500: 0.8, 3,000: 0.75; "
                              "below by more than 10% at 250, 1,500, 3,000")
    # a rate without a valid epoll is said so, and the other rate is still read
    m.valid = m.valid[~((m.valid["dispatch"] == "epoll") & (m.valid["offered_rate_rps"] == 500))]
    text = beyond.each_rate(m, lambda **rate: beyond.uring_over_epoll(
        m, "cpu_server_pct", "total_conns", "server CPU", **rate))
    assert text.startswith("at 500 req/s, not measured: cpu_server_pct: no round measured")
    assert "at 1,000 req/s, io_uring's server CPU / epoll's" in text



def test_findings_read_the_newest_run_and_its_recorded_cache(tmp_path):
    frame = make_points("cpp-fig5-cpp-vs-connections", {"stream_conns": list(CONNS)},
                        run_id="llc-run")
    frame["scenario"] = beyond.LLC_SCENARIO
    run_dir = write_run(tmp_path, frame)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["cpu"]["last_level_cache_bytes"] = 260 * 2**20
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    llc, cold, *uring = beyond.findings(read_runs([tmp_path]))
    assert llc.run == "llc-run" and "× the 260 MiB last-level cache" in llc.text
    assert "from 4 to 131,072 connections" in llc.text
    assert cold.run is None and all(f.run is None for f in uring)
