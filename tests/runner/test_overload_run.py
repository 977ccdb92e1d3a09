"""A real run past the server's capacity: the S-Client keeps offering the offered rate and the
point measures the server's saturation throughput; the queue form closes the loop and its
window is judged not steady state."""

from __future__ import annotations

import pandas as pd
import pytest

from clients.spec import sclient_sockets
from clients.validity import Code, Kind
from harness.results.format import REASON_SEPARATOR
from tests.runner.test_run import run_scenario

# The papers' servers were far slower than their clients: held to 3 % of its CPU, the server
# answers about a sixth of what one generator offers on the other CPU. Its listen queue is
# Linux 2.4's SOMAXCONN (128): a deeper one holds attempts past their timeouts, and the
# server then answers only requests their generator has already given up on.
SERVER = """
topology: {file: topologies/loopback.yaml}
server: {dispatch: epoll, accept: multi, reply_bytes: 100, backlog: 128}
cpus: {server: 0, generator: 1, server_budget_pct: 3, budget_period_us: 50000}
interference_retries: 2
"""
TIMEOUT_S = 0.5


def test_past_capacity_the_s_client_keeps_offering_and_measures_the_capacity(tmp_path):
    (tmp_path / "closed").mkdir()
    (tmp_path / "open").mkdir()
    capacity_run, _ = run_scenario(tmp_path / "closed", f"""
name: overload-capacity
hot: {{generator: sclient, conns: 50, requests_per_conn: 1}}
warmup_s: 1
duration_s: 2
{SERVER}""")
    capacity = pd.read_parquet(capacity_run / "points.parquet")["reply_rate_rps"].iloc[0]
    offered = round(6 * capacity, -2)
    sockets = sclient_sockets(offered, TIMEOUT_S, TIMEOUT_S)
    # the warm-up outlasts the two timeouts: the sockets in flight have settled by the window
    run, _ = run_scenario(tmp_path / "open", f"""
name: overload-sclient
hot: {{generator: sclient, rate_rps: {offered}, requests_per_conn: 1,
       connect_timeout_s: {TIMEOUT_S}, response_timeout_s: {TIMEOUT_S}}}
sweep:
  hot.overload, hot.conns: [[sclient, {sockets}], [queue, 50]]
warmup_s: 1.5
duration_s: 2
{SERVER}""", timeout=240)
    points = pd.read_parquet(run / "points.parquet").set_index("hot_overload")
    sclient = points.loc["sclient"]
    assert sclient["request_rate_rps"] == pytest.approx(offered, rel=0.02)
    assert 0.5 * capacity <= sclient["reply_rate_rps"] <= 1.5 * capacity
    assert sclient["timeouts_total"] > 0.5 * offered * 2  # most attempts could not be served
    # nothing of the generator's or of the window's steady state; neighbours crowding the
    # generator's CPU on a shared machine are judged apart (interference, measured again).
    # The server's stats are read when its event loop turns: held to 3 % of a CPU in 50 ms
    # periods under six times its capacity, that was 40-85 ms after the edge, over 1 % of
    # the window (window_disagrees naming the server stats): a limit of that source, not of
    # the S-Client (docs/bench-window.md)
    codes = set((sclient["invalid_codes"] or "").split(",")) - {""}
    assert not {c for c in codes if Code(c).kind is Kind.GENERATOR}, sclient["invalid_reason"]
    assert not codes & {"backlog_drained", "backlog_grew", "no_replies"}, \
        sclient["invalid_reason"]
    if "window_disagrees" in codes:
        disagreeing = [r for r in sclient["invalid_reason"].split(REASON_SEPARATOR)
                       if "off the" in r and "window's edges" in r]
        assert all(r.startswith("the server stats ") for r in disagreeing), disagreeing
    # the queue form: sends wait for one of 50 connections in a backlog (expired past the
    # response timeout, so it settles at rate × timeout) that the server drains oldest first:
    # its replies in the window answer sends from before it, and the window is not steady
    queue = points.loc["queue"]
    assert {"backlog_drained", "backlog_grew"} & set(queue["invalid_codes"].split(",")), \
        queue["invalid_reason"]
