"""httperf, wrk and wrk2 drivers: argv built from a LoadSpec, parsers on captured outputs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clients import LoadSpec, command, parse_result, run, validate
from clients.drivers.common import Unsupported
from tests.clients.conftest import GENERATOR_CPU

FIXTURES = Path(__file__).resolve().parents[2] / "clients" / "fixtures"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def spec(generator: str, **kw) -> LoadSpec:
    kw.setdefault("targets", ["127.0.0.1:8080"])
    kw.setdefault("hot_conns", 50)
    return LoadSpec(generator=generator, duration_s=2, warmup_s=1, **kw)


def test_wrk_parser_on_captured_closed_loop_run():
    doc = parse_result(spec("wrk"), fixture("wrk_closed_loop.txt"), "")
    validate(doc)
    text = fixture("wrk_closed_loop.txt")
    total = int(text.split(" requests in ")[0].split()[-1])
    assert doc["replies"]["total"] == total
    assert doc["replies"]["by_status"] == {"2xx": total}
    assert doc["reply_rate_rps"] == float(text.split("Requests/sec:")[1].split()[0])
    unc = doc["latency"]["uncorrected"]
    assert unc["p50_us"] <= unc["p90_us"] <= unc["p99_us"] <= unc["max_us"]
    assert doc["latency"]["corrected"]["p50_us"] is None  # wrk cannot correct: closed loop
    assert doc["late_sends"] is None and doc["generator_cpu"]["pct"] is None


def test_wrk_parser_counts_non_2xx_replies():
    doc = parse_result(spec("wrk"), fixture("wrk_non2xx.txt"), "")
    validate(doc)
    assert doc["replies"]["by_status"]["non_2xx_3xx"] == doc["replies"]["total"] > 0
    assert doc["replies"]["by_status"]["2xx"] == 0


def test_documents_from_specs_with_paths_are_json():
    s = spec("wrk", json_path=Path("/tmp/unused.json"))
    assert json.loads(json.dumps(parse_result(s, fixture("wrk_closed_loop.txt"), "")))


def test_wrk_parser_refuses_a_run_without_summary():
    with pytest.raises(ValueError, match="requests in"):
        parse_result(spec("wrk"), fixture("wrk_refused.txt"), "")


def test_wrk2_parser_reads_both_spectra_into_buckets():
    doc = parse_result(spec("wrk2", rate_rps=2000), fixture("wrk2_constructed.txt"), "")
    validate(doc)
    cor, unc = doc["latency"]["corrected"], doc["latency"]["uncorrected"]
    assert cor["count"] == unc["count"] == sum(b[2] for b in cor["buckets"]) == 8000
    assert cor["p50_us"] == 1020.0 and unc["p50_us"] == 980.0
    assert cor["max_us"] == 4100.0 and cor["mean_us"] == 1050.0
    assert doc["errors"] == {"connect_timeout": 0, "refused": 0, "reset": 2,
                             "response_timeout": 3, "no_local_port": 0, "other": 0}
    assert doc["replies"]["by_status"] == {"2xx": 7995, "non_2xx_3xx": 5}


def test_httperf_out_of_ports_is_its_own_error_kind():
    out = fixture("httperf_conns.txt").replace("addrunavail 0", "addrunavail 17")
    doc = parse_result(spec("httperf", rate_rps=2000), out, "")
    validate(doc)
    assert doc["errors"]["no_local_port"] == 17 and doc["errors"]["other"] == 0
    assert not doc["valid"] and any("ran out of local ports 17 times" in r
                                    for r in doc["invalid_reasons"])


def test_httperf_reports_running_out_of_descriptors_and_the_rule_judges_it():
    """httperf's driver reports the fact (errors.no_descriptor: fd-unavail and ftab-full);
    clients/validity.py alone says what it means: the generator, not the server, limited the
    run. Without such errors the rule says nothing."""
    from clients.drivers import httperf

    short = fixture("httperf_conns.txt").replace("fd-unavail 0", "fd-unavail 3").replace(
        "ftab-full 0", "ftab-full 2")
    facts = httperf.parse(spec("httperf", rate_rps=1000, requests_per_conn=1), short, "")
    assert facts["valid"] and facts["invalid_reasons"] == []  # facts only
    assert facts["errors"]["no_descriptor"] == 5 and facts["errors"]["other"] == 0
    doc = parse_result(spec("httperf", rate_rps=1000, requests_per_conn=1), short, "")
    validate(doc)
    assert not doc["valid"] and doc["invalid_codes"] == ["out_of_descriptors"]
    assert "ran out of file descriptors 5 times" in doc["invalid_reasons"][0]
    enough = parse_result(spec("httperf", rate_rps=1000, requests_per_conn=1),
                          fixture("httperf_conns.txt"), "")
    assert enough["valid"] and enough["errors"]["no_descriptor"] == 0


def test_httperf_parser_on_sessions_conns_and_refusals():
    sessions = parse_result(spec("httperf", rate_rps=2000), fixture("httperf_sessions.txt"), "")
    validate(sessions)
    assert sessions["replies"] == {"total": 4000, "by_status": {"2xx": 4000}}
    assert sessions["duration_s"] == 2.106
    assert sessions["reply_rate_rps"] == pytest.approx(4000 / 2.106)
    assert sessions["generator_cpu"]["user_s"] > 0
    # 1,899.5 req/s sent: within 5 % of 1,950 offered, not of 2,000 (clients/validity.py)
    assert sessions["invalid_reasons"] == [
        "offered load not delivered: the generator sent 1,899 req/s of the 2,000 offered "
        "(-5.0 %, tolerance 5 %)"]
    assert parse_result(spec("httperf", rate_rps=1950), fixture("httperf_sessions.txt"),
                        "")["valid"]
    refused = parse_result(spec("httperf", rate_rps=200), fixture("httperf_refused.txt"), "")
    validate(refused)
    assert refused["errors"]["refused"] == sum(refused["errors"].values()) == 100
    conns = parse_result(spec("httperf", rate_rps=1000, requests_per_conn=1),
                         fixture("httperf_conns.txt"), "")
    assert conns["config"]["connections_opened"] == conns["replies"]["total"] == 2000


def test_argv_mapping():
    argv = command(spec("httperf", rate_rps=2000, cpu=1))
    assert argv[:3] == ["taskset", "-c", "1"]
    # the think time is one 1 ms timer tick short of the 25 ms period (httperf adds the tick)
    assert "--wsess=50,120,0.024000" in argv and "--hog" not in argv
    assert "--hog" in command(spec("httperf", rate_rps=2000, hog=True))
    poisson = command(spec("httperf", rate_rps=1000, requests_per_conn=1, arrivals="poisson"))
    assert "--period=e0.001000" in poisson
    wrk = command(spec("wrk", threads=1))
    assert wrk[-1] == "http://127.0.0.1:8080/" and "-c50" in wrk and "-d3s" in wrk


@pytest.mark.parametrize(("generator", "kw", "message"), [
    ("wrk", {"rate_rps": 1000}, "no constant-rate mode"),
    ("httperf", {"rate_rps": 100, "cold_conns": 10}, "cannot hold idle"),
    ("httperf", {"rate_rps": 100, "hot_conns": 5000}, "1024 descriptors"),
    ("httperf", {"rate_rps": 20000, "hot_conns": 10}, "1 ms timer ticks"),
    ("httperf", {}, "closed loop"),
    ("wrk2", {}, "needs a rate"),
])
def test_unsupported_options_name_an_alternative(generator, kw, message):
    with pytest.raises(Unsupported, match=message):
        command(spec(generator, **kw))


def test_targets_outside_the_policy_are_refused():
    with pytest.raises(ValueError, match="--allow-any-target"):
        command(spec("wrk", targets=["192.0.2.1:80"]))


@pytest.mark.parametrize("generator", ["wrk", "httperf", "wrk2"])
def test_live_run_validates(generator, server):
    if shutil.which(generator) is None:
        pytest.skip(f"{generator} is not on PATH; its parser is tested on a fixture above")
    rate = None if generator == "wrk" else 1000
    doc = run(LoadSpec(generator=generator, targets=[server.address], hot_conns=10, rate_rps=rate,
                       duration_s=1, warmup_s=0, cpu=GENERATOR_CPU))
    validate(doc)
    assert doc["replies"]["total"] > 0 and not any(doc["errors"].values())
    assert server.snapshot()["replies"] >= doc["replies"]["total"]
