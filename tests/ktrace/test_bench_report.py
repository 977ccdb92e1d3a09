"""docs/bench-ktrace.md's numbers from made-up runs: changes are paired by point and round,
invalid pairs left out, and the 3 % target met or not, both ways."""

from __future__ import annotations

import pandas as pd
import pytest

from scripts.bench_ktrace import growth, pairs, summary


def bench_points(traced_rate: float, traced_valid: bool = True) -> pd.DataFrame:
    rows = []
    for rep in range(2):
        for dispatch, per_call in (("select", 30_000.0), ("epoll", 2000.0)):
            for cold in (0, 5000):
                for trace in (False, True):
                    rows.append({
                        "dispatch": dispatch, "cold_conns": cold, "repetition": rep,
                        "kernel_trace": trace, "offered_rate_rps": 40_000.0,
                        "reply_rate_rps": traced_rate if trace else 40_000.0,
                        "cpu_server_pct": 55.0 if trace else 50.0,
                        "cpu_generator_pct": 40.0, "steal_pct": 0.1,
                        "other_server_cpu_pct": 1.0, "generator_wait_pct": 0.5,
                        "valid": traced_valid or not trace,
                        "kernel_events_traced": 600_000 if trace else None,
                        "kernel_trace_window_s": 3.0 if trace else None,
                        "kernel_select_ns_per_call":
                            per_call * (1 + cold / 1000) if trace and dispatch == "select"
                            else None,
                        "kernel_epoll_wait_ns_per_call":
                            per_call if trace and dispatch == "epoll" else None})
    return pd.DataFrame(rows)


def test_changes_are_the_traced_run_against_the_untraced_one_of_its_round():
    both = pairs(bench_points(traced_rate=39_600.0))
    assert len(both) == 8  # 4 points × 2 rounds
    assert both["reply_rate_rps_change"].tolist() == pytest.approx([-1.0] * 8)
    assert both["cpu_server_pct_change"].tolist() == pytest.approx([10.0] * 8)
    assert both["events_per_s"].tolist() == pytest.approx([200_000.0] * 8)


def test_the_target_is_met_at_3_percent_or_less():
    points = bench_points(traced_rate=39_600.0)
    text = " ".join(summary(pairs(points), points))
    assert "server's CPU by +10.0 % to +10.0 %" in text
    assert "met in every valid pair (worst -1.0 %)" in text


def test_and_not_met_past_it():
    points = bench_points(traced_rate=38_000.0)
    text = " ".join(summary(pairs(points), points))
    assert "NOT met in 8 of 8 valid pairs (worst -5.0 %)" in text
    assert "Where an arm fell behind it (8 valid pairs" in text


def test_an_invalid_traced_run_leaves_its_pair_out_and_none_valid_measures_nothing():
    points = bench_points(traced_rate=30_000.0, traced_valid=False)
    both = pairs(points)
    assert both["reply_rate_rps_change"].isna().all()
    (said,) = summary(both, points)
    assert said.startswith("No pair is valid, so this run measures no overhead: other tasks "
                           "ran on the server's CPU for a median 1 %")


def test_growth_compares_the_most_idle_connections_with_the_fewest():
    traced = bench_points(40_000.0)
    text = " ".join(growth(traced[traced["kernel_trace"]]))
    assert "select's in-kernel time per call at 5,000 idle connections is 6.0 times" in text
    assert "epoll_wait's in-kernel time per call at 5,000 idle connections is 1.0 times" in text
