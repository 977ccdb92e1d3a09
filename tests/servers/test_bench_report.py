"""docs/bench-servers.md's verdicts from made-up points, each in both directions: a stable
backend within 10 % or not, wb-server's CPU per reply within the 0.7× target or not, a miss
out of reach or not."""

from __future__ import annotations

import pandas as pd

from harness.analysis.derive import add_derived
from harness.scenario import ExternalServer, WbServer
from servers.bench import cpu_medians, floor, idle_medians, ratios, server_label, shape_checks


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


WB, HELD = "wb-server epoll", "wb-server epoll, hold-off 200 µs"


def nginx_points(ours_cpu_pct: float, rate: float | None = 20_000.0,
                 ours_sys_pct: float | None = None) -> pd.DataFrame:
    """Both servers at one load, 3 untraced runs each (nginx at 40 % of a CPU for 20,000
    replies/s: 20 µs a reply), and one traced run of each that costs more."""
    rows = [{"label": label, "server": "nginx" if label == "nginx" else "wb-server",
             "offered_rate_rps": rate, "repetition": rep, "kernel_trace": rep == 3,
             "reply_rate_rps": 20_000.0, "valid": True,
             "cpu_server_pct": (ours_cpu_pct if label == WB else 40.0) * (2 if rep == 3 else 1),
             "cpu_server_sys_pct": ours_sys_pct if label == WB and ours_sys_pct else 30.0,
             "cpu_server_user_pct": 1.0, "resp_time_p50_ms": 0.03, "resp_time_p99_ms": 0.1,
             "server_run_periods": 1000.0, "sampled_window_s": 3.0}
            for label in (WB, "nginx") for rep in range(4)]
    return add_derived(pd.DataFrame(rows))


def test_wb_server_meets_the_target_when_it_costs_at_most_0_7_of_nginx():
    (line,) = ratios(cpu_medians(nginx_points(ours_cpu_pct=26.0)))
    assert "wb-server epoll **0.65×** (met; p50 0.030 ms)" in line
    assert line.startswith("- 20,000 req/s: against nginx's 20.00 µs per reply")


def test_and_does_not_when_it_costs_more():
    (line,) = ratios(cpu_medians(nginx_points(ours_cpu_pct=30.0)))
    assert "wb-server epoll **0.75×** (NOT met" in line


def test_the_traced_runs_stay_out_of_cpu_per_reply():
    (row,) = cpu_medians(nginx_points(ours_cpu_pct=26.0)).query("label == @WB").itertuples()
    assert (row.runs, row.valid, row.cpu) == (3, 3, 13.0)


def test_a_miss_whose_kernel_time_alone_is_over_the_target_is_out_of_reach():
    medians = cpu_medians(nginx_points(ours_cpu_pct=32.0, rate=None, ours_sys_pct=30.0))
    (line,) = floor(medians)
    assert line.startswith("- closed loop: wb-server epoll spends 0.50 µs per reply in user "
                           "space and 15.00 µs in the kernel; that kernel time alone is 0.75×")
    assert "out of reach" in line


def test_a_miss_with_room_in_user_space_is_not_called_out_of_reach():
    medians = cpu_medians(nginx_points(ours_cpu_pct=32.0, rate=None, ours_sys_pct=20.0))
    (line,) = floor(medians)
    assert "0.50× nginx's whole 20.00 µs" in line and "what is left to cut" in line
    assert floor(cpu_medians(nginx_points(ours_cpu_pct=26.0, rate=None))) == []


def test_two_wb_server_entries_are_told_apart_by_their_hold_off():
    assert server_label(WbServer(dispatch="epoll")) == WB
    assert server_label(WbServer(dispatch="epoll", min_wait_us=200)) == HELD
    nginx = ExternalServer(kind="external", name="nginx", command=["nginx"], port=8080)
    assert server_label(nginx) == "nginx"
