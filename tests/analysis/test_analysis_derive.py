"""Derived metrics: knees, regressions, cycles provenance, profile shares."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from harness.analysis import derive
from harness.results.compat import upgrade_points


def _points(**columns: object) -> pd.DataFrame:
    """Valid records as a run's are read (upgraded to today's facts: one CPU for the server,
    its saturation where it was not recorded)."""
    frame = pd.DataFrame(columns)
    frame["valid"] = True
    return upgrade_points(frame, {})


def test_saturation_is_the_knee_of_reply_rate() -> None:
    offered = [500.0, 1000.0, 1500.0, 2000.0] * 2
    points = _points(offered_rate_rps=offered, cold_conns=[0] * 4 + [2000] * 4,
                     reply_rate_rps=[500.0, 1000.0, 1100.0, 1050.0, 500.0, 620.0, 610.0, 600.0],
                     cpu_server_pct=[40.0, 80.0, 99.0, 99.5, 60.0, 99.0, 99.0, 99.0])
    table = derive.saturation(points, ["cold_conns"]).set_index("cold_conns")
    assert table.loc[0, "saturation_rps"] == 1100.0
    assert table.loc[0, "knee_offered_rps"] == 1000.0
    assert table.loc[2000, "saturation_rps"] == 620.0
    assert table.loc[2000, "knee_offered_rps"] == 500.0
    assert table["saturated"].all()


def test_replies_behind_with_an_idle_server_are_not_saturation() -> None:
    # BM98 Fig 9 once read "saturated" with the server at 37 % CPU: something else limited it
    points = _points(offered_rate_rps=[500.0, 1000.0, 1500.0], reply_rate_rps=[500.0, 700.0, 700.0],
                     cpu_server_pct=[20.0, 37.0, 37.0])
    assert not derive.saturation(points, []).loc[0, "saturated"]


def test_saturation_never_reached_is_flagged_as_lower_bound() -> None:
    points = _points(offered_rate_rps=[100.0, 200.0], reply_rate_rps=[100.0, 199.0])
    table = derive.saturation(points, [])
    assert not table.loc[0, "saturated"]
    assert table.loc[0, "saturation_rps"] == 199.0


def test_regression_slope_correlation_and_capacity_estimate() -> None:
    rates = np.arange(100.0, 1100.0, 100.0)
    # The last point is past saturation (replies far below the offered rate): it must not
    # bend the line.
    points = _points(request_rate_rps=[*rates, 3000.0], offered_rate_rps=[*rates, 3000.0],
                     reply_rate_rps=[*rates, 1000.0], cpu_idle_pct=[*(100 - 0.05 * rates), 0.0],
                     cpu_user_pct=[*(0.01 * rates), 10.0])
    derived = derive.add_derived(points)
    table = derive.regressions(derived, "request_rate_rps", ["cpu_idle_pct", "cpu_user_pct"], [])
    idle = table.set_index("metric").loc["cpu_idle_pct"]
    assert idle["slope"] == pytest.approx(-0.05)
    assert idle["r"] == pytest.approx(-1.0)
    assert idle["x_intercept"] == pytest.approx(2000.0)
    assert idle["n"] == 10
    assert np.isnan(table.set_index("metric").loc["cpu_user_pct", "x_intercept"])


def test_regression_is_fitted_within_rounds() -> None:
    """Three rounds of one line, each round a few points of idle higher than the one before
    (the host drifting between rounds), each point ±1 about its round's line: a pooled fit
    reads the offsets as scatter (r -0.85); within rounds the line is there (r ≤ -0.99), with
    the same slope and the capacity of the rounds' mean line. Scrambled within each round,
    the idle time has no line: r near 0 either way."""
    rates = np.array([50.0, 100.0, 175.0, 250.0])
    noise = np.array([1.0, -1.0, 1.0, -1.0])
    offsets = (0.0, 12.0, 24.0)
    idle = np.concatenate([80 - 0.2 * rates + offset + noise for offset in offsets])
    points = derive.add_derived(_points(
        run_id="r", repetition=np.repeat([0, 1, 2], 4), request_rate_rps=np.tile(rates, 3),
        offered_rate_rps=np.tile(rates, 3), reply_rate_rps=np.tile(rates, 3), cpu_idle_pct=idle))
    pooled = stats.linregress(points["request_rate_rps"], points["cpu_idle_pct"]).rvalue
    assert pooled > -0.9
    fit = derive.regressions(points, "request_rate_rps", ["cpu_idle_pct"], []).loc[0]
    assert fit["r"] < -0.99 and fit["slope"] == pytest.approx(-0.2, abs=0.01)
    assert fit["x_intercept"] == pytest.approx((80 + 12) / 0.2, rel=0.02)
    scrambled = points.assign(cpu_idle_pct=np.concatenate(
        [np.array([40.0, 60.0, 60.0, 40.0]) + offset for offset in offsets]))
    assert abs(derive.regressions(scrambled, "request_rate_rps", ["cpu_idle_pct"], [])
               .loc[0, "r"]) < 0.3


def test_regression_min_x_drops_low_rates() -> None:
    rates = np.arange(10.0, 110.0, 10.0)
    points = derive.add_derived(_points(request_rate_rps=rates, offered_rate_rps=rates,
                                        reply_rate_rps=rates, cpu_idle_pct=100 - rates / 2))
    table = derive.regressions(points, "request_rate_rps", ["cpu_idle_pct"], [], min_x=20.0)
    assert table.loc[0, "n"] == 9


def test_cycles_provenance_is_never_lost() -> None:
    points = _points(cycles=[1e6, 2e6, np.nan], packets_in=[50.0, 50.0, 50.0],
                     packets_out=[50.0, 50.0, 50.0], cycles_estimated=[True, False, None],
                     cycles_per_packet=[np.nan, np.nan, np.nan],
                     instructions=[np.nan, 4e6, np.nan])
    derived = derive.add_derived(points)
    assert list(derived["cycles_per_packet"][:2]) == [1e4, 2e4]
    assert list(derived["cycles_source"]) == [
        derive.CYCLES_ESTIMATED, derive.CYCLES_MEASURED, derive.CYCLES_UNAVAILABLE,
    ]
    assert np.isnan(derived.loc[0, "instructions_per_packet"])  # unavailable, not zero
    assert derived.loc[1, "instructions_per_packet"] == 4e4


def test_events_per_dispatch_and_totals() -> None:
    points = _points(dispatch_calls=[100.0, 100.0], dispatch_events=[250.0, 300.0],
                     events_per_dispatch=[np.nan, 7.0], hot_conns=[50, 50],
                     cold_conns=[200, 2950], cpu_server_pct=[50.0, 50.0],
                     reply_rate_rps=[1000.0, 500.0])
    derived = derive.add_derived(points)
    assert list(derived["events_per_dispatch"]) == [2.5, 7.0]  # measured value kept
    assert list(derived["total_conns"]) == [250, 3000]
    assert list(derived["cpu_us_per_conn"]) == pytest.approx([500.0, 1000.0])


def test_select_profile_share() -> None:
    keys = {"run_id": "r", "repetition": 0}
    profiles = pd.DataFrame([
        {**keys, "point_id": "a", "symbol": "do_select", "layer": "syscall", "pct": 20.0},
        {**keys, "point_id": "a", "symbol": "tcp_poll", "layer": "tcp", "pct": 5.0},
        {**keys, "point_id": "a", "symbol": "tcp_sendmsg", "layer": "tcp", "pct": 75.0},
        {**keys, "point_id": "b", "symbol": "tcp_sendmsg", "layer": "tcp", "pct": 100.0},
    ])
    share = derive.profile_share(profiles, derive.SELECT_SYMBOLS).set_index("point_id")
    assert share.loc["a", "profile_pct"] == 25.0
    assert share.loc["b", "profile_pct"] == 0.0


def test_the_stacks_layers_sum_to_it_and_say_their_share() -> None:
    # 1000 packets each way; the server's reads took 600 µs in the kernel; the receive softirq
    # 1500 ns per packet received, the transmit softirq 200 per packet sent
    points = pd.DataFrame({"packets_in": [1000.0, 1000.0], "packets_out": [1000.0, 1000.0],
                           "kernel_read_calls": [1000.0, np.nan],
                           "kernel_read_ns_per_call": [600.0, np.nan],
                           "kernel_write_calls": [0.0, np.nan],
                           "kernel_server_cpu_rx_ns_per_packet": [1500.0, np.nan],
                           "kernel_server_cpu_tx_packets": [1000.0, np.nan],
                           "kernel_server_cpu_tx_ns_per_packet": [200.0, np.nan]})
    layers = derive.kernel_layers(derive.add_derived(points))
    traced = layers.drop_duplicates("layer").set_index("layer")
    # no TCP function timed (no fentry): the paper's System Call layer is not measured
    assert pd.isna(traced.loc[derive.KERNEL_SOCKET_LAYER_NAME, derive.KERNEL_LAYER_NS])
    traced = traced.drop(derive.KERNEL_SOCKET_LAYER_NAME)
    assert traced[derive.KERNEL_LAYER_NS].to_dict() == pytest.approx({
        "system calls": 300.0, "receive softirq": 1500.0, "transmit softirq": 200.0,
        derive.KERNEL_STACK_LAYER: 2000.0})
    assert traced.loc["system calls", derive.KERNEL_LAYER_SHARE] == pytest.approx(15.0)
    assert traced.loc[derive.KERNEL_STACK_LAYER, derive.KERNEL_LAYER_SHARE] == 100.0
    # a record that was not traced has no layer at all, not a zero one
    untraced = layers.iloc[1::2]
    assert untraced[[derive.KERNEL_LAYER_NS, derive.KERNEL_LAYER_SHARE]].isna().all().all()


def test_the_system_call_layer_is_the_calls_less_tcps_functions_where_they_were_timed() -> None:
    """A sender's writes, 3,000 ns a packet of its 1,000 each way, of which tcp_sendmsg took
    2,600: the System Call layer is the 400 left over (tcp_recvmsg timed, never called, took
    none); where fentry timed neither function it is null, not the writes' whole time."""
    timed = {"kernel_fn_tcp_sendmsg_calls": [1000.0, np.nan],
             "kernel_fn_tcp_sendmsg_ns_per_call": [5200.0, np.nan],
             "kernel_fn_tcp_recvmsg_calls": [0.0, np.nan],
             "kernel_fn_tcp_recvmsg_ns_per_call": [np.nan, np.nan]}
    points = pd.DataFrame({"packets_in": [1000.0] * 2, "packets_out": [1000.0] * 2,
                           "kernel_write_calls": [1000.0] * 2,
                           "kernel_write_ns_per_call": [6000.0] * 2,
                           "kernel_read_calls": [0.0] * 2, **timed})
    derived = derive.add_derived(points)
    assert derived["kernel_syscall_ns_per_packet"].tolist() == [3000.0, 3000.0]
    assert derived.loc[0, derive.KERNEL_SOCKET_LAYER] == pytest.approx(400.0)
    assert pd.isna(derived.loc[1, derive.KERNEL_SOCKET_LAYER])


def test_cpu_per_connection_uses_the_windows_accept_count() -> None:
    points = pd.DataFrame({"cpu_server_pct": [50.0, 50.0], "sampled_window_s": [2.0, 2.0],
                           "connections_accepted": [1000, np.nan],
                           "reply_rate_rps": [400.0, 400.0]})
    out = derive.add_derived(points)
    # 1 s of CPU over 1000 accepts; without the count, 0.5 s/s over 400 replies/s.
    assert out["cpu_us_per_conn"].tolist() == pytest.approx([1000.0, 1250.0])


def test_cpu_and_run_periods_per_reply() -> None:
    points = pd.DataFrame({"cpu_server_pct": [50.0, 20.0], "sampled_window_s": [4.0, 4.0],
                           "reply_rate_rps": [10_000.0, 20_000.0],
                           "server_run_periods": [8_000, np.nan]})
    out = derive.add_derived(points)
    # 0.5 s/s over 10,000 replies/s; 8,000 run periods over 40,000 replies
    assert out["cpu_us_per_reply"].tolist() == pytest.approx([50.0, 10.0])
    assert out["run_periods_per_reply"][0] == pytest.approx(0.2)
    assert np.isnan(out["run_periods_per_reply"][1])  # runs recorded before the column


def test_idle_under_a_cpu_budget_is_of_the_budget():
    points = pd.DataFrame({"cpu_server_pct": [10.0, 20.5, 50.0], "cpu_idle_pct": [85.0, 79.0, 50.0],
                           "server_budget_pct": [20.0, 20.0, None]})
    idle = derive.add_derived(points)["server_idle_pct"]
    # half the budget unused; the budget used up (a hair over it clips to 0); no budget: the CPU's
    assert idle.tolist() == [50.0, 0.0, 50.0]


def test_replies_are_counted_against_the_requests_sent() -> None:
    """A Poisson schedule sent 84 requests a second where 100 were nominal: all answered."""
    points = _points(offered_rate_rps=[100.0, 100.0], request_rate_rps=[84.0, 100.0],
                     reply_rate_rps=[84.0, 50.0])
    derived = derive.add_derived(points)
    assert derived["replies_per_sent"].tolist() == [1.0, 0.5]
    assert derived["reply_ratio"].tolist() == [0.84, 0.5]


def test_accept_and_alloc_fd_as_shares_of_one_cpu() -> None:
    """In-kernel ns over the traced window, as % of one CPU; null where nothing was timed."""
    points = _points(kernel_trace_window_s=[2.0, 2.0], kernel_accept_calls=[1000, None],
                     kernel_accept_ns_per_call=[4000.0, None],
                     kernel_fn_alloc_fd_calls=[1000, None],
                     kernel_fn_alloc_fd_ns_per_call=[200.0, None])
    derived = derive.add_derived(points)
    assert derived.loc[0, "kernel_accept_cpu_pct"] == pytest.approx(0.2)
    assert derived.loc[0, "kernel_alloc_fd_cpu_pct"] == pytest.approx(0.01)
    assert derived.loc[1, ["kernel_accept_cpu_pct", "kernel_alloc_fd_cpu_pct"]].isna().all()


def test_packets_per_receive_softirq_and_none_where_the_count_was_not_kept() -> None:
    points = _points(kernel_server_cpu_rx_packets=[2000.0, 2000.0, 0.0],
                     kernel_server_cpu_rx_softirqs=[500.0, None, 0.0])
    derived = derive.add_derived(points)
    assert derived.loc[0, "kernel_rx_packets_per_softirq"] == 4.0
    assert derived.loc[1:, "kernel_rx_packets_per_softirq"].isna().all()
    # a run from before the count was kept has no column: null, not an error
    older = derive.add_derived(_points(kernel_server_cpu_rx_packets=[2000.0]))
    assert older["kernel_rx_packets_per_softirq"].isna().all()
