"""Histogram layout shared by C and Python, merging, schema checks, and `wanbench load`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from clients import LoadSpec, run, validate
from clients.schema import (
    SCHEMA_VERSION,
    Histogram,
    bucket_bounds_ns,
    bucket_of,
    merge_histograms,
    skeleton,
)
from clients.spec import native_argv
from tests.clients.conftest import GENERATOR_CPU, wait_line


def test_bucket_layout_resolves_1us_at_the_low_end_and_1_percent_above():
    for ns in (0, 63, 64, 999, 1000, 16_383, 16_384, 1_000_000, 10**9, 3 * 10**12):
        lo, hi = bucket_bounds_ns(bucket_of(ns))
        assert lo <= ns < hi
        assert hi - lo <= max(1000, ns / 100)


def test_sclient_buckets_use_the_python_layout(server, sclient, tmp_path):
    doc = run(LoadSpec(generator="sclient", targets=[server.address], hot_conns=5, rate_rps=500,
                       duration_s=1, warmup_s=0, cpu=GENERATOR_CPU,
                       json_path=str(tmp_path / "r.json")))
    buckets = doc["latency"]["uncorrected"]["buckets"]
    assert buckets
    for lo, hi, _ in buckets:
        lo_ns, hi_ns = bucket_bounds_ns(bucket_of(round(lo * 1000)))
        assert (lo_ns / 1e3, hi_ns / 1e3) == pytest.approx((lo, hi))
    # re-summarising the C buckets in Python gives the C percentiles (bucket midpoints)
    c = doc["latency"]["uncorrected"]
    merged = merge_histograms(c, {"buckets": []})
    assert merged["count"] == c["count"]
    assert merged["p50_us"] == pytest.approx(c["p50_us"], abs=0.5)


def test_merge_adds_counts_and_keeps_extremes():
    a, b = Histogram(), Histogram()
    for ns in (10_000, 20_000, 30_000):
        a.record(ns)
    b.record(5_000_000)
    m = merge_histograms(a.to_dict(), b.to_dict())
    assert m["count"] == 4
    assert m["min_us"] == 10.0 and m["max_us"] == 5000.0
    assert m["p50_us"] == pytest.approx(20.0, rel=0.01)


def test_schema_rejects_a_malformed_document():
    doc = skeleton("sclient", {})
    validate(doc)
    doc["latency"]["corrected"]["buckets"] = [[1.0, 2.0]]
    with pytest.raises(jsonschema.ValidationError):
        validate(doc)
    with pytest.raises(jsonschema.ValidationError):
        validate(skeleton("ab", {}))


def test_wb_sclient_is_built_with_the_one_schema_version():
    """The version is defined once, in clients/schema.py: the build gives it to the C that
    writes wb-sclient's documents, and the JSON Schema holds a document to it."""
    repo = Path(__file__).resolve().parents[2]
    planned = subprocess.run(["make", "-n", "-B", "build/bin/wb-sclient"], cwd=repo,
                             capture_output=True, text=True, check=True).stdout
    assert f"-DSCHEMA_VERSION={SCHEMA_VERSION} " in planned
    doc = skeleton("sclient", {})
    doc["schema_version"] = SCHEMA_VERSION - 1
    with pytest.raises(jsonschema.ValidationError):
        validate(doc)


def wanbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", "load", *args],
                          capture_output=True, text=True, timeout=60)


def test_cli_refuses_outside_targets_naming_the_flag():
    r = wanbench("--target", "192.0.2.10:80", "--hot-conns", "1", "--duration", "1")
    assert r.returncode == 2
    assert "--allow-any-target" in r.stderr and "192.0.2.10" in r.stderr


def test_cli_runs_and_writes_the_document(server, sclient, tmp_path):
    out = tmp_path / "load.json"
    r = wanbench("--generator", "sclient", "--target", server.address, "--hot-conns", "10",
                 "--rate", "500", "--duration", "1", "--warmup", "0.2", "--cpu",
                 str(GENERATOR_CPU), "--json", str(out))
    doc = json.loads(out.read_text())
    validate(doc)
    assert r.returncode == (0 if doc["valid"] else 1)
    assert "sclient:" in r.stdout and "replies" in r.stdout
    assert doc["reply_rate_rps"] == pytest.approx(500, rel=0.05)


def test_cli_json_dash_is_standard_output_and_the_summary_is_readable(server, sclient, tmp_path):
    r = subprocess.run([sys.executable, "-m", "harness.cli", "load", "--generator", "sclient",
                        "--target", server.address, "--hot-conns", "5", "--rate", "300",
                        "--duration", "1", "--warmup", "0.2", "--cpu", str(GENERATOR_CPU),
                        "--json", "-"], capture_output=True, text=True, timeout=60,
                       cwd=tmp_path)
    doc = json.loads(r.stdout)  # the document alone on stdout, no file named "-"
    validate(doc)
    assert not (tmp_path / "-").exists()
    assert r.returncode == (0 if doc["valid"] else 1)
    said = r.stderr
    assert "sclient:" in said and "{" not in said and "n/a" not in said
    errors = [name for name, count in doc["errors"].items() if count]
    assert ("errors: none" in said) == (not errors)
    (latency,) = [line for line in said.splitlines() if "latency corrected: p50 " in line]
    assert " us" not in latency and any(unit in latency for unit in ("µs,", "ms,", " s,"))


def test_cli_reports_unsupported_combinations():
    r = wanbench("--generator", "wrk", "--target", "127.0.0.1:9", "--hot-conns", "2",
                 "--rate", "100", "--duration", "1")
    assert r.returncode == 2 and "no constant-rate mode" in r.stderr
    r = wanbench("--generator", "asyncio", "--target", "127.0.0.1:9", "--hot-conns", "2",
                 "--rate", "100", "--duration", "1", "--spin-us", "50")
    assert r.returncode == 2 and "spin_us is a wb-sclient option" in r.stderr
    r = wanbench("--target", "127.0.0.1:9", "--hot-conns", "2", "--duration", "1",
                 "--stream-read")
    assert r.returncode == 2 and "stream_read: the streams that read are stream_conns" in r.stderr


def test_streams_that_read_are_one_switch_to_the_binary_which_refuses_them_alone(sclient):
    spec = LoadSpec(generator="sclient", targets=["127.0.0.1:9"], stream_conns=4,
                    stream_mbps=100, stream_read=True)
    argv = native_argv(spec)
    assert "--stream-read" in argv and argv[argv.index("--stream-read") + 1].startswith("--")
    out = subprocess.run([str(sclient), "--target", "127.0.0.1:9", "--hot-conns", "1",
                          "--duration", "1", "--stream-read"], capture_output=True, text=True,
                         timeout=10)
    assert out.returncode == 2 and "--stream-read needs --stream N" in out.stderr


def test_cli_holds_cold_connections_until_interrupted(server, sclient, tmp_path):
    out = tmp_path / "hold.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "load", "--target", server.address, "--cold", "100",
         "--duration", "0", "--warmup", "0", "--json", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_line(proc, timeout=30) == {"event": "cold_ready", "established": 100}
        assert server.snapshot()["connections_current"] == 100
        proc.send_signal(signal.SIGINT)
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert json.loads(out.read_text())["cold"]["held"] == 100
