"""Every number of a scenario is bounded: each limit taken at its value and refused past it;
the grid's size is checked before it is built; where a binary owns a limit, the scenario
takes its description's (`--describe`)."""

from __future__ import annotations

import pytest

from clients.spec import sclient_description
from harness.scenario import (
    MAX_DURATION_S,
    MAX_GUEST_S,
    MAX_POINT_RUNS,
    MAX_WAIT_S,
    ScenarioError,
    parse,
    points,
)
from harness.servers import describe
from tests.conftest import build

SCLIENT = sclient_description(str(build("build/bin/wb-sclient")))["limits"]
MAX_RATE_RPS = SCLIENT["rate"][1]
MAX_REQUESTS_PER_CONN = int(SCLIENT["requests-per-conn"][1])
MAX_STREAM_MBPS = SCLIENT["stream-mbps"][1]
MIN_TIMEOUT_S = SCLIENT["response-timeout"][0]
MAX_BACKLOG = describe(build("build/bin/wb-server")).limits["backlog"][1]
MAX_REPLY_BYTES = describe().limits["reply_bytes"][1]

BASE = "name: limits\nhot: {conns: 1}\n"
EXTERNAL = "name: limits\nserver: {kind: external, name: x, port: 9, command: [srv]}\n"

# (scenario text, --set path, a value at the limit, a value past it)
LIMITS = [
    (BASE, "duration_s", MAX_DURATION_S, MAX_DURATION_S + 1),
    (BASE, "duration_s", MAX_DURATION_S, ".inf"),
    (BASE, "warmup_s", MAX_WAIT_S, MAX_WAIT_S + 1),
    (BASE, "warmup_s", 0, ".nan"),
    (BASE, "hot.rate_rps", MAX_RATE_RPS, MAX_RATE_RPS * 1.1),
    (BASE, "hot.requests_per_conn", MAX_REQUESTS_PER_CONN, MAX_REQUESTS_PER_CONN + 1),
    (BASE, "hot.connect_timeout_s", MAX_WAIT_S, MAX_WAIT_S + 1),
    (BASE, "hot.response_timeout_s", MIN_TIMEOUT_S, MIN_TIMEOUT_S / 10),
    (BASE, "hot.response_timeout_s", MAX_WAIT_S, "1e30"),
    (BASE, "cold.ramp_rps", MAX_RATE_RPS, ".inf"),
    (BASE, "cold.interval_s", MAX_DURATION_S, MAX_DURATION_S + 1),
    (BASE, "stream", f"{{conns: 1, mbps: {MAX_STREAM_MBPS}}}", "{conns: 1, mbps: .inf}"),
    (BASE, "server.backlog", MAX_BACKLOG, MAX_BACKLOG + 1),
    (BASE, "guest.timeout_s", MAX_GUEST_S, MAX_GUEST_S + 1),
    (BASE, "order_seed", 2**63 - 1, 2**63),
    (BASE, "name", "a" * 64, "a" * 65),
    (EXTERNAL, "server.ready_timeout_s", MAX_WAIT_S, "1e30"),
    (EXTERNAL, "server.reply_bytes", MAX_REPLY_BYTES, MAX_REPLY_BYTES + 1),
]


@pytest.mark.parametrize(("text", "path", "at_limit", "past_it"), LIMITS,
                         ids=[f"{path}={past}" for _, path, _, past in LIMITS])
def test_each_number_is_taken_at_its_limit_and_refused_past_it(text, path, at_limit, past_it):
    parse(text, "s.yaml", [f"{path}={at_limit}"])
    with pytest.raises(ScenarioError) as refused:
        parse(text, "s.yaml", [f"{path}={past_it}"])
    assert str(refused.value).startswith(f"--set '{path}=")  # the --set, not a file line


def grid(*axes: int, repetitions: int = 1) -> str:
    paths = ("cold.conns", "hot.conns", "server.reply_bytes")
    ranges = zip(paths[:len(axes)], axes, strict=True)
    return f"name: g\nrepetitions: {repetitions}\nsweep:\n" + "".join(
        f"  {path}: {{start: 1, stop: {n}, step: 1}}\n" for path, n in ranges)


def test_a_grid_of_the_limit_is_built_and_one_past_it_refused():
    assert len(points(parse(grid(100, 100)))) == MAX_POINT_RUNS
    with pytest.raises(ScenarioError, match=r"s.yaml:3: the sweep is 100 × 100 points × 2 "
                                            r"repetitions = 20,000; at most 10,000"):
        parse(grid(100, 100, repetitions=2), "s.yaml")
    with pytest.raises(ScenarioError, match="1,000 × 1,000 × 1,000 points"):
        parse(grid(1000, 1000, 1000), "s.yaml")  # before: built a billion points


def test_a_range_is_counted_before_it_is_built():
    assert len(points(parse(grid(MAX_POINT_RUNS)))) == MAX_POINT_RUNS
    with pytest.raises(ScenarioError, match=r"s.yaml:4: sweep.cold.conns: a range of "
                                            r"1,000,000,000 values"):
        parse(grid(1_000_000_000), "s.yaml")  # before: 2 GB in 20 s
    with pytest.raises(ScenarioError, match="sweep.cold.conns.stop: wants a finite number"):
        parse("name: r\nsweep:\n  cold.conns: {start: 0, stop: .inf, step: 1}\n")
