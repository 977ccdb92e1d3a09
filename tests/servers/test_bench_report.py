"""docs/bench-servers.md's verdicts from made-up points, each in both directions: a stable
backend within 10 % or not, wb-server's CPU per reply within the 0.8× target or not."""

from __future__ import annotations

import pandas as pd

from harness.analysis.derive import add_derived
from servers.bench import idle_medians, ratios, shape_checks


def idle_points(epoll_top_cpu_pct: float) -> pd.DataFrame:
    """Every backend at 0 and 10,000 idle: select collapses; epoll's CPU at 10,000 idle is
    given (50 % at 0 idle; 100,000 replies/s either way)."""
    rows = []
    for backend in ("select", "poll", "devpoll", "epoll", "rtsig", "uring"):
        for idle in (0, 10_000):
            collapses = backend in ("select", "poll") and idle
            cpu = epoll_top_cpu_pct if backend == "epoll" and idle else 50.0
            for rep in range(3):
                rows.append({"dispatch": backend, "cold_conns": idle, "repetition": rep,
                             "reply_rate_rps": 5_000.0 if collapses else 100_000.0,
                             "cpu_server_pct": 99.0 if collapses else cpu,
                             "events_per_dispatch": 3.0, "valid": True})
    return add_derived(pd.DataFrame(rows))


def test_a_flat_backend_is_within_ten_percent():
    lines = shape_checks(idle_medians(idle_points(epoll_top_cpu_pct=52.0)))
    assert lines[0].startswith("- select at 10,000 idle: 5% of epoll's rate")
    epoll = next(line for line in lines if line.startswith("- epoll"))
    assert "(within 10 %); highest median CPU per reply 104% of its 0-idle cost (within" in epoll


def test_a_backend_whose_cost_grows_is_not():
    lines = shape_checks(idle_medians(idle_points(epoll_top_cpu_pct=60.0)))
    epoll = next(line for line in lines if line.startswith("- epoll"))
    assert "120% of its 0-idle cost (NOT within 10 %)" in epoll


def test_invalid_repetitions_stay_out_of_the_medians():
    points = idle_points(epoll_top_cpu_pct=52.0)
    spoiled = (points["dispatch"] == "epoll") & (points["cold_conns"] == 10_000)
    points.loc[spoiled & (points["repetition"] == 0), ["cpu_server_pct", "valid"]] = [500.0,
                                                                                      False]
    table = idle_medians(add_derived(points))
    row = table.loc[("epoll", 10_000)]
    assert (row["valid"], row["runs"]) == (2, 3)
    assert row["cpu"] == 5.2  # µs per reply from the two valid repetitions


def nginx_points(ours_cpu_pct: float) -> pd.DataFrame:
    rows = [{"server": server, "offered_rate_rps": 20_000.0, "repetition": rep,
             "reply_rate_rps": 20_000.0, "valid": True,
             "cpu_server_pct": ours_cpu_pct if server == "wb-server" else 40.0}
            for server in ("wb-server", "nginx") for rep in range(3)]
    return add_derived(pd.DataFrame(rows))


def test_wb_server_meets_the_target_when_it_costs_at_most_0_8_of_nginx():
    (line,) = ratios(nginx_points(ours_cpu_pct=30.0))
    assert "ratio **0.75×** (meets the ≤ 0.8× target)" in line


def test_and_does_not_when_it_costs_more():
    (line,) = ratios(nginx_points(ours_cpu_pct=36.0))
    assert "ratio **0.90×** (does NOT meet the ≤ 0.8× target)" in line
