"""A real run past the server's capacity: the S-Client keeps offering the offered rate and the
point measures the server's saturation throughput; the queue form closes the loop and its
window is judged not steady state."""

from __future__ import annotations

import pandas as pd
import pytest

from clients.spec import sclient_sockets
from clients.validity import Code, Kind
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
    # nothing of the generator's, of the window's steady state or of its edges (the server's
    # counters are read at them, not asked of its event loop, whose answer came 40-85 ms late
    # when held to 3 % of a CPU under six times its capacity); neighbours crowding the
    # generator's CPU on a shared machine are judged apart (interference, measured again)
    codes = set(_codes(sclient)) - {""}
    assert not {c for c in codes if Code(c).kind is Kind.GENERATOR}, sclient["invalid_reason"]
    assert not codes & {"backlog_drained", "backlog_grew", "no_replies", "window_disagrees"}, \
        sclient["invalid_reason"]
    # the queue form: sends wait for one of 50 connections in a backlog (expired past the
    # response timeout, so it settles at rate × timeout) that the server drains oldest first:
    # its replies in the window answer sends from before it, and the window is not steady
    queue = points.loc["queue"]
    assert {"backlog_drained", "backlog_grew"} & set(_codes(queue)), \
        queue["invalid_reason"]


def _codes(point: pd.Series) -> list[str]:
    """A record's reason codes (none: a valid point's is null)."""
    codes = point["invalid_codes"]
    return codes.split(",") if isinstance(codes, str) else []
