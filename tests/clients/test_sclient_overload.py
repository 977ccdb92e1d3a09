"""wb-sclient's S-Client form (--overload sclient) against a server that never answers: every
scheduled send starts its own attempt whatever the server does, each is aborted at its
timeout and counted, and a generator given too few sockets says it could not keep offering."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from clients import judged
from clients.spec import LoadSpec, native_argv, sclient_sockets
from tests.clients.conftest import GENERATOR_CPU

RATE, TIMEOUT_S = 2000, 0.1


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A listener that accepts nothing: the kernel completes handshakes into its queue and
    every request waits there unanswered until the generator aborts it."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4096)
        yield f"127.0.0.1:{listener.getsockname()[1]}"


def sclient_spec(target: str, tmp_path: Path) -> LoadSpec:
    return LoadSpec(generator="sclient", targets=[target], hot_conns=sclient_sockets(
        RATE, TIMEOUT_S, TIMEOUT_S), rate_rps=RATE, requests_per_conn=1, overload="sclient",
        connect_timeout_s=TIMEOUT_S, response_timeout_s=TIMEOUT_S, duration_s=1.0,
        warmup_s=0.5, cpu=GENERATOR_CPU, json_path=str(tmp_path / "result.json"))


def run_with_sockets(spec: LoadSpec, sockets: int) -> dict:
    """The spec's run, with wb-sclient allowed `sockets` in flight (by hand: LoadSpec refuses
    fewer than the rate and timeouts need), judged as the spec."""
    argv = native_argv(spec)
    argv[argv.index("--hot-conns") + 1] = str(sockets)
    subprocess.run([str(Path("build/bin/wb-sclient").resolve()), *argv], check=True,
                   timeout=30, capture_output=True)
    return judged(spec, json.loads(Path(spec.json_path).read_text()))


def test_every_scheduled_attempt_starts_and_each_is_aborted_at_its_timeout(
        sclient, silent_server, tmp_path):
    spec = sclient_spec(silent_server, tmp_path)
    doc = run_with_sockets(spec, spec.hot_conns)
    requests, errors = doc["requests"], doc["errors"]
    assert doc["config"]["overload"] == "sclient"
    assert requests["sent"] == requests["scheduled"] > 0.99 * RATE * spec.duration_s
    assert requests["no_socket"] == 0 and requests["queued"] == requests["dropped"] == 0
    assert doc["replies"]["total"] == 0
    # each request of the window waited its response timeout, then was aborted and counted
    # (those of the window's last 100 ms time out after it)
    assert errors["response_timeout"] >= 0.9 * requests["sent"]
    # sockets in flight: the last response timeout's sends, about 200 at each edge
    assert 0.8 * RATE * TIMEOUT_S <= requests["in_flight_end"] <= spec.hot_conns
    # judged: nothing answered, and it kept offering (late sends, a busy machine's, may add)
    assert "no_replies" in doc["invalid_codes"]
    assert "offer_shortfall" not in doc["invalid_codes"]


def test_a_generator_with_too_few_sockets_could_not_keep_offering(sclient, silent_server,
                                                                   tmp_path):
    """Each socket lives its response timeout (the kernel completes every handshake at once):
    with half the sockets that needs, about half the scheduled sends find none free."""
    spec = sclient_spec(silent_server, tmp_path)
    doc = run_with_sockets(spec, int(RATE * TIMEOUT_S / 2))
    requests = doc["requests"]
    assert requests["no_socket"] > 0.3 * requests["scheduled"]
    assert requests["sent"] + requests["no_socket"] == requests["scheduled"]
    reasons = dict(zip(doc["invalid_codes"], doc["invalid_reasons"], strict=True))
    assert "found all its sockets in flight" in reasons["offer_shortfall"]
