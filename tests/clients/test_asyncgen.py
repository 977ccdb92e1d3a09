"""The asyncio generator against wb-server: same schema, rate and cold behaviour as sclient."""

from __future__ import annotations

import subprocess
import time

import pytest

from clients import LoadSpec, command, parse_result, run, validate
from clients.asyncgen.conn import ResponseFramer
from tests.clients.conftest import GENERATOR_CPU, stop_generator, wait_line


@pytest.mark.timing
def test_fixed_rate_within_2_percent_and_valid_schema(server, tmp_path):
    doc = run(LoadSpec(generator="asyncio", targets=[server.address], hot_conns=50, rate_rps=2000,
                       duration_s=3, warmup_s=0.5, cpu=GENERATOR_CPU,
                       json_path=str(tmp_path / "r.json")))
    validate(doc)
    assert doc["generator"] == "asyncio"
    assert doc["request_rate_rps"] == pytest.approx(2000, rel=0.02)
    assert doc["reply_rate_rps"] == pytest.approx(2000, rel=0.02)
    assert doc["latency"]["corrected"]["count"] > 5000
    assert doc["latency"]["tcp_srtt"]["count"] == 50  # the kernel's RTT of each hot connection


def test_cold_connections_held_and_confirmed_by_server(server, tmp_path):
    spec = LoadSpec(generator="asyncio", targets=[server.address], cold_conns=1000,
                    cold_interval_s=0.5, duration_s=0, warmup_s=0, cpu=GENERATOR_CPU,
                    json_path=str(tmp_path / "r.json"))
    proc = subprocess.Popen(command(spec), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert wait_line(proc, timeout=30) == {"event": "cold_ready", "established": 1000}
        assert server.snapshot()["connections_current"] == 1000
        time.sleep(1.2)
        served = server.snapshot()["requests"]
    finally:
        stop_generator(proc)
    doc = parse_result(spec, "", "")
    validate(doc)
    assert doc["cold"]["held"] == 1000
    # every 0.5 s each cold connection sends one request (a rotating active set): in 1.2 s
    # each has sent at least twice
    assert served >= 2000
    assert doc["cold"]["replies"] >= served - 1000 > 0


def test_framer_handles_split_and_pipelined_responses():
    framer = ResponseFramer()
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"
    assert framer.feed(reply[:10]) == []
    assert framer.feed(reply[10:] + reply + b"HTTP/1.1 404 Not") == [200, 200]
    assert framer.feed(b" Found\r\ncontent-length: 0\r\n\r\n") == [404]
    with pytest.raises(ValueError, match="Content-Length"):
        framer.feed(b"HTTP/1.1 200 OK\r\n\r\n")
