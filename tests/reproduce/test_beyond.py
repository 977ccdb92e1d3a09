"""The findings beyond the papers say where a curve bends on data that bends, and that it does
not on flat data; no paper claim reads a dispatch series it does not name."""

from __future__ import annotations

import json

import pytest

from harness.reproduce import beyond, claims
from harness.reproduce.verdict import Measured, Status, Unmeasured, evaluate_claim
from harness.results.runset import read_runs

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
         "kernel_write_ns_per_call": 0.0, "kernel_tx_packets": 0,
         "kernel_rx_ns_per_packet": ns}
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
            f"state at the receiver, {state / 260:.2g}× the 260 MiB last-level cache)") in text


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
    assert [f.scenario for f in found][:2] == list(beyond.SCENARIOS)
    assert all(f.run is None and f.text == f"no run of {f.scenario}" for f in found)
    text = beyond.markdown(found)
    assert text.startswith("Beyond the papers: no paper makes these claims")
    assert "- **BM98 Fig 9 past 2000 cold connections" in text



def test_findings_read_the_newest_run_and_its_recorded_cache(tmp_path):
    frame = make_points("cpp-fig5-cpp-vs-connections", {"stream_conns": list(CONNS)},
                        run_id="llc-run")
    frame["scenario"] = beyond.LLC_SCENARIO
    run_dir = write_run(tmp_path, frame)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["cpu"]["last_level_cache_bytes"] = 260 * 2**20
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    llc, cold = beyond.findings(read_runs([tmp_path]))
    assert llc.run == "llc-run" and "× the 260 MiB last-level cache" in llc.text
    assert "from 4 to 131,072 connections" in llc.text
    assert cold.run is None
