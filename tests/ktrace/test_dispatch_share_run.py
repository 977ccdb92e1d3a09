"""A real traced run of BMD99 Table 2's comparison in small (loopback, 1,000 idle
connections, 1 s windows): the dispatch call's in-kernel share of the server's CPU
(derive.kernel_dispatch_share_pct) is measured for both servers, select's well above epoll's."""

from __future__ import annotations

from pathlib import Path

from harness.analysis import derive
from tests.conftest import build
from tests.ktrace.test_run import run

SCENARIO = """
name: dispatch-share-smoke
topology: {file: topologies/loopback.yaml}
server: {reply_bytes: 92}
hot: {generator: sclient, conns: 4, rate_rps: 500}
cold: {conns: 1000, ramp_rps: 10000}
sweep: {server.dispatch: [select, epoll]}
repetitions: 1
warmup_s: 0.3
duration_s: 1
kernel_trace: true
"""


def test_selects_share_of_the_server_cpu_is_well_above_epolls(tmp_path: Path, ktrace_bin: Path):
    build("build/bin/wb-server")
    build("build/bin/wb-sclient")
    points, _, _ = run(tmp_path, SCENARIO)
    share = derive.add_derived(points).set_index("dispatch")["kernel_dispatch_share_pct"]
    # select scans 1,000 idle descriptors on every call, epoll_wait looks at its ready list:
    # whatever else ran on the machine, its share stays a small part of select's
    assert share["select"] > 0 and share["epoll"] > 0, share
    assert share["epoll"] < share["select"] / 3, share
