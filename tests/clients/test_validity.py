"""The validity rules, each in both directions, and every generator held to them when the
server is absent or dies mid-run."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

import clients
from clients import validity
from clients.spec import LoadSpec, native_argv
from harness.servers import running
from tests.clients.conftest import GENERATOR_CPU, server_config
from tests.conftest import build, free_port

INSTALLED = [g for g in ("sclient", "asyncio", "httperf", "wrk")
             if g in ("sclient", "asyncio") or shutil.which(g)]


def test_late_sends_over_one_percent():
    assert validity.late_sends(10, 1000, 1000) is None
    late = validity.late_sends(11, 1000, 1000)
    assert "11 of 1,000 scheduled sends (1.1 %)" in late.sentence
    assert late.code is validity.Code.LATE_SENDS and late.kind is validity.Kind.GENERATOR
    # the likely cause is named when the generator waited for its CPU
    assert validity.late_sends(11, 1000, 1000, 0.4).sentence.endswith("fell behind")
    assert validity.late_sends(11, 1000, 1000, 37.0).sentence.endswith(
        "(it waited for its CPU 37 % of the window)")


def test_sclient_reports_facts_and_the_one_definition_judges_them():
    """wb-sclient's own document no longer carries a copy of the late-sends rule: the same
    facts come out valid from the generator and invalid once judged."""
    from clients import LoadSpec, judged
    spec = LoadSpec(generator="sclient", targets=["127.0.0.1:9"], hot_conns=1, rate_rps=100,
                    duration_s=1)
    facts = {"valid": True, "invalid_reasons": [], "duration_s": 1.0, "late_sends": 50,
             "late_threshold_us": 1000, "requests": {"scheduled": 100, "sent": 100},
             "replies": {"total": 100}, "errors": {},
             "generator_cpu": {"user_s": 0.01, "sys_s": 0.01, "run_delay_s": 0.3}}
    doc = judged(spec, facts)
    assert doc["valid"] is False
    assert doc["invalid_reasons"] == [validity.late_sends(50, 100, 1000, 30.0).sentence]
    assert doc["invalid_codes"] == ["late_sends"]
    assert judged(spec, {**facts, "late_sends": 0, "invalid_reasons": []})["valid"] is True


def test_the_late_threshold_is_the_rules_and_each_generator_is_told_it():
    """The threshold a send is late by belongs to the late-sends rule (clients/validity.py),
    not to the generators' defaults: every argv the harness builds carries it."""
    for generator in ("sclient", "asyncio"):
        spec = LoadSpec(generator=generator, targets=["127.0.0.1:9"], hot_conns=1, rate_rps=100)
        argv = native_argv(spec)
        assert "--late-us" in argv, argv
        assert float(argv[argv.index("--late-us") + 1]) == validity.LATE_THRESHOLD_US[generator]
    asked = LoadSpec(generator="sclient", targets=["127.0.0.1:9"], hot_conns=1, rate_rps=100,
                     late_us=250.0)
    assert native_argv(asked)[native_argv(asked).index("--late-us") + 1] == "250.0"


def test_wb_sclient_counts_late_sends_only_against_a_threshold_it_is_told(server, sclient):
    """Run by hand without --late-us it has no rule to count by: late sends are null (not
    reported), never judged against a copy of the threshold."""
    argv = [str(sclient), "--target", server.address, "--hot-conns", "2", "--rate", "200",
            "--duration", "0.5", "--cpu", str(GENERATOR_CPU)]
    untold = json.loads(subprocess.run(argv, capture_output=True, text=True, timeout=30,
                                       check=True).stdout)
    assert untold["late_sends"] is None and untold["late_threshold_us"] is None
    assert all("late" not in second for second in untold["timeline"])
    told = json.loads(subprocess.run([*argv, "--late-us", "1000"], capture_output=True,
                                     text=True, timeout=30, check=True).stdout)
    assert told["late_sends"] is not None and told["late_threshold_us"] == 1000


def test_generator_saturation_counts_waiting_for_a_cpu():
    assert validity.generator_saturated(80, 10) is None
    assert "ran 90 % and waited for a CPU 10 %" in validity.generator_saturated(90, 10).sentence


def _sclient_doc(late_sends: int, sent: int, cpu_s: float = 1.0) -> dict:
    """1 s at 1,000 req/s: wb-sclient's own accounting of its CPU and schedule."""
    return {"generator": "sclient", "duration_s": 1.0, "offered_rate_rps": 1000.0,
            "late_sends": late_sends, "late_threshold_us": 1000,
            "requests": {"scheduled": 1000, "sent": sent}, "replies": {"total": sent},
            "errors": {}, "generator_cpu": {"user_s": 0.3 * cpu_s, "sys_s": 0.7 * cpu_s,
                                            "run_delay_s": 0.0, "spin_idle_s": 0.0}}


def test_a_generator_that_kept_its_schedule_was_not_the_bottleneck_whatever_its_cpu():
    """`wanbench load`'s verdict: at 100 % of its CPU, a generator that sent its whole
    schedule on time is valid; one that sent 2 % late, or 80 % of the offered requests, is
    invalid, its own fault (generator kind). At 60 % of its CPU neither is saturated."""
    from clients import judged
    spec = LoadSpec(generator="sclient", targets=["127.0.0.1:9"], hot_conns=4, rate_rps=1000,
                    duration_s=1)
    assert judged(spec, _sclient_doc(late_sends=5, sent=1000))["valid"]
    for behind in (_sclient_doc(late_sends=20, sent=1000), _sclient_doc(late_sends=0, sent=800)):
        doc = judged(spec, behind)
        assert "generator_saturated" in doc["invalid_codes"], doc["invalid_reasons"]
        saturated = doc["invalid_reasons"][doc["invalid_codes"].index("generator_saturated")]
        assert "fell behind" in saturated
    assert "generator_saturated" not in judged(spec, _sclient_doc(20, 1000, cpu_s=0.6))[
        "invalid_codes"]
    assert validity.Code.GENERATOR_SATURATED.kind is validity.Kind.GENERATOR


def test_rate_shortfall_beyond_tolerance():
    # httperf sent 1,783 of 2,000 req/s: -11 %
    assert "1,783 req/s of the 2,000 offered (-10.8 %" in validity.rate_shortfall(
        2000, 5, 8916).sentence
    assert validity.rate_shortfall(2000, 5, 9600) is None  # -4 %
    # a Poisson draw of 100 expected requests varies by ±10 % on its own
    assert validity.rate_shortfall(100, 1, 88, poisson=True) is None
    assert validity.rate_shortfall(100, 1, 60, poisson=True) is not None
    assert validity.rate_shortfall(None, 5, 10) is None  # closed loop: nothing offered


def test_streams_that_carried_less_than_asked_did_not_measure_their_bandwidth():
    """cpp Fig 4's sweep asked one connection for 200 and 300 Mbit/s and it carried 141-161
    here: the points stood at levels they never reached."""
    short = validity.stream_shortfall(300.0, 150.7)
    assert short is not None and short.code is validity.Code.RATE_SHORTFALL
    assert "carried 150.7 Mbit/s of the 300 asked (-49.8 %" in short.sentence
    assert validity.stream_shortfall(100.0, 99.996) is None
    assert validity.stream_shortfall(100.0, 95.0) is None  # at the tolerance
    assert validity.stream_shortfall(None, 800.0) is None  # unpaced: no bandwidth asked
    # read from a generator's document, as every point is judged
    from clients import judged
    spec = LoadSpec(generator="sclient", targets=["127.0.0.1:9"], stream_conns=1,
                    stream_mbps=300, duration_s=1)
    doc = {"duration_s": 1.0, "requests": {}, "replies": {}, "errors": {}, "late_sends": 0,
           "stream": {"conns": 1, "write_bytes": 1460, "target_mbps": 300.0,
                      "achieved_mbps": 150.7, "bytes": 18837500}}
    assert judged(spec, doc)["invalid_codes"] == ["rate_shortfall"]
    delivered = {**doc, "stream": {**doc["stream"], "achieved_mbps": 299.9}}
    assert judged(spec, delivered)["valid"]


def test_no_replies_short_window_refused_and_cold_lost():
    assert validity.no_replies(20, 0) and validity.no_replies(20, 1) is None
    assert validity.no_replies(0, 0) is None  # cold-only or stream: no replies expected
    assert "2.60 s of the 5 s asked" in validity.short_window(2.6, 5).sentence
    assert validity.short_window(4.9, 5) is None
    assert "3,428 connections refused" in validity.refused(3428).sentence
    assert validity.refused(0) is None
    assert validity.cold_lost(999, 1000) and validity.cold_lost(1000, 1000) is None


def test_a_point_that_sent_nothing_of_its_window_measured_nothing():
    """BM98 Figs 3-6's realistic select at 12,000 req/s (reference run 20261126T122829,
    8 KB, repetition 0): 24,000 sends scheduled in the 2 s window, 92 of them late, none sent
    (each waited for a connection the server held), 2,989 replies to the warm-up's requests:
    it was judged valid. The same facts with the window's requests sent stay valid."""
    def facts(sent: int) -> validity.Facts:
        generator = validity.GeneratorFacts(
            "sclient", asked_s=2, hot_conns=50, window_s=2, offered_rps=12000, scheduled=24000,
            sent=sent, late=92, late_threshold_us=1000, replies=2989, refused=0)
        window = validity.WindowFacts(server_cpu_pct=19.9, reply_rps=1494.5, server_cpus=0.2,
                                      cold_asked=750, cold_held=750)
        return validity.Facts({"": generator}, window=window)

    verdict = validity.judge(facts(0))
    assert [r.code for r in verdict.reasons] == [validity.Code.NOTHING_SENT]
    assert verdict.reasons[0].kind is validity.Kind.SERVER
    assert validity.judge(facts(2989)).valid  # behind the offered rate, but it measured
    assert validity.nothing_sent(0, 0) is None  # cold-only or stream: nothing to send
    assert validity.nothing_sent(50, None) is None  # a generator that does not count sends


def test_sources_within_one_percent_of_the_window_agree_and_further_ones_do_not():
    """The bound is CLOCK_OFFSET_FRACTION's reasoning: 1 % off still overlaps on 99 %."""
    assert validity.window_disagrees({"sampler": (0.029, -0.03), "generator": (0.0, 0.0)},
                                     3.0) is None
    assert validity.window_disagrees({}, 3.0) is None  # no source recorded its edges
    off = validity.window_disagrees({"sampler": (0.0, 0.0), "server_stats": (0.0, -0.031)},
                                    3.0)
    assert off is not None and off.code is validity.Code.WINDOW_DISAGREES
    assert off.kind is validity.Kind.SETUP
    assert off.sentence.startswith("the server stats measured from +0.0 ms to -31.0 ms off the "
                                   "3 s window's edges, over 1% of it")
    facts = validity.Facts({}, window=validity.WindowFacts(
        window_s=3.0, edge_offsets_s={"generator": (0.2, 0.2)}))
    assert [r.code for r in validity.judge(facts).reasons] == [validity.Code.WINDOW_DISAGREES]


def test_server_saturation_means_the_server_was_the_bottleneck():
    # BM98 Fig 9's false positive: replies behind the offered rate with the server at 37 %
    assert validity.server_saturated(20000, 30000, 37.0) is False
    assert validity.server_saturated(20000, 30000, 99.0) is True
    assert validity.server_saturated(29900, 30000, 99.0) is False  # busy but keeping up
    assert validity.server_saturated(50000, None, 98.0) is True  # closed loop: busy server
    assert validity.server_saturated(50000, None, 33.0) is False
    assert validity.server_saturated(50000, 60000, 150.0, server_cpus=2) is False
    # a server that ran 60 % and waited 35 % for the CPU a neighbour took wanted it all along
    assert validity.server_saturated(50000, None, 60.0, server_wait_pct=35.0) is True
    assert validity.server_saturated(50000, None, 60.0, server_wait_pct=3.0) is False


def _spec(generator: str, port: int, tmp_path: Path, **kw) -> LoadSpec:
    kw.setdefault("rate_rps", None if generator == "wrk" else 400)
    return LoadSpec(generator=generator, targets=[f"127.0.0.1:{port}"], hot_conns=4,
                    duration_s=kw.pop("duration_s", 2), warmup_s=0.5, cpu=GENERATOR_CPU,
                    json_path=str(tmp_path / f"{generator}.json"), **kw)


@pytest.mark.parametrize("generator", INSTALLED)
def test_no_server_at_the_target_is_invalid(generator: str, tmp_path: Path):
    if generator == "sclient":
        build("build/bin/wb-sclient")
    if generator == "wrk":  # gives up at once: an error (exit 2 from wanbench load)
        with pytest.raises(clients.GeneratorFailed, match="Connection refused"):
            clients.run(_spec(generator, free_port(), tmp_path))
        return
    doc = clients.run(_spec(generator, free_port(), tmp_path))
    assert not doc["valid"]
    reasons = " ".join(doc["invalid_reasons"])
    assert "no replies" in reasons or "refused" in reasons, reasons


@pytest.mark.parametrize("generator", INSTALLED)
def test_server_killed_mid_run_is_invalid(generator: str, tmp_path: Path):
    build("build/bin/wb-server")
    if generator == "sclient":
        build("build/bin/wb-sclient")
    with running(server_config(tmp_path)) as server:
        threading.Timer(1.5, server.proc.kill).start()  # a second into the 2 s window
        started = time.monotonic()
        doc = clients.run(_spec(generator, server.port, tmp_path, duration_s=2))
    assert time.monotonic() - started < 30
    assert not doc["valid"], doc["invalid_reasons"]
    reasons = " ".join(doc["invalid_reasons"])
    assert any(word in reasons for word in ("refused", "stopped early", "not delivered")), \
        reasons


def test_idle_polls_are_not_generator_work():
    # wb-sclient polls rather than sleeps just before a due send: its CPU reads 100 % at
    # 40,000 req/s though most polls find nothing to do
    assert validity.generator_saturated(100, idle_poll=62.0) is None
    reason = validity.generator_saturated(100, idle_poll=2.0)
    assert "ran 98 % besides 2 % in idle polls" in reason.sentence
    assert validity.idle_poll_pct(2.5, 4.0) == pytest.approx(62.5)
    assert validity.idle_poll_pct(None, 4.0) is None
