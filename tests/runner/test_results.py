"""Run directory: atomic point records, tables rebuilt from them, resume bookkeeping."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from clients.atomic import TEMPORARY_SUFFIX
from harness.results.format import PARAMETER_COLUMNS, SCHEMA_VERSION, ResultsFormatError
from harness.results.rows import generator_metrics
from harness.results.store import RunDir
from harness.scenario import load, points


def _record(point_id: str, rep: int, rate: float, run_id: str = "r") -> dict:
    ids = {"run_id": run_id, "point_id": point_id, "repetition": rep}
    return {"point": {**ids, "reply_rate_rps": rate, "valid": True},
            "timeseries": [{**ids, "t_s": 1.0, "source": "generator", "metric": "replies",
                            "value": rate}],
            "histograms": [], "profiles": []}


def _new_run(tmp_path: Path) -> RunDir:
    """A run of scenario demo with its manifest, its writer's lock held."""
    run = RunDir.create(tmp_path, "demo", "k1")
    run.begin_run({"schema_version": SCHEMA_VERSION, "run_id": run.run_id, "scenario_name": "demo"},
                  {"kernel": {"release": "k1"}})
    return run


def test_records_become_tidy_tables(tmp_path: Path):
    run = _new_run(tmp_path)
    run.write_record("aaa", 0, _record("aaa", 0, 100.0))
    run.write_record("aaa", 1, _record("aaa", 1, 110.0))
    run.rebuild_tables()
    points = pd.read_parquet(run.path / "points.parquet")
    assert sorted(points["reply_rate_rps"]) == [100.0, 110.0]
    series = pd.read_parquet(run.path / "timeseries.parquet")
    assert list(series.columns) == ["run_id", "point_id", "repetition", "t_s", "source",
                                    "metric", "value"]
    assert not (run.path / "histograms.parquet").exists()  # empty tables are not written
    assert run.finished() == {"aaa-r0", "aaa-r1"}


def test_a_half_written_record_does_not_count_as_finished(tmp_path: Path):
    run = _new_run(tmp_path)
    run.write_record("aaa", 0, _record("aaa", 0, 1.0))
    # What a SIGKILL during write_atomic leaves behind: a hidden temporary file.
    (run.records_dir / f".bbb-r0.json.x1y2{TEMPORARY_SUFFIX}").write_text('{"point": {"rep')
    assert run.finished() == {"aaa-r0"}
    run.rebuild_tables()
    assert len(pd.read_parquet(run.path / "points.parquet")) == 1


def test_open_refuses_a_directory_without_manifest(tmp_path: Path):
    with pytest.raises(ResultsFormatError, match="manifest.json: missing"):
        RunDir.open(tmp_path)


def test_reply_rate_counts_only_successful_replies():
    doc = {"reply_rate_rps": 1000.0, "replies": {"total": 2000,
                                                 "by_status": {"200": 1500, "400": 500}}}
    row = generator_metrics(doc)
    assert row["reply_rate_rps"] == 750.0
    assert row["replies_non_2xx"] == 500
    wrk_style = {"reply_rate_rps": 10.0, "replies": {"total": 10, "by_status": {"2xx": 10}}}
    assert generator_metrics(wrk_style)["reply_rate_rps"] == 10.0
    assert generator_metrics({"reply_rate_rps": 5.0})["reply_rate_rps"] == 5.0


def test_open_rebuilds_tables_a_kill_left_missing(tmp_path: Path):
    # A SIGKILL between a point's record and the table rebuild: records, no points.parquet,
    # and the rebuild's temporary file.
    run = _new_run(tmp_path)
    for rep in range(3):
        run.write_record("aaa", rep, _record("aaa", rep, 100.0 + rep, run.run_id))
    (run.path / f".points.parquet.k1ll3d{TEMPORARY_SUFFIX}").write_bytes(b"PAR1 cut short")
    (run.records_dir / f".aaa-r3.json.x1y2{TEMPORARY_SUFFIX}").write_text('{"point": {"rep')
    run.close()  # killed
    reopened = RunDir.open(run.path)
    points = pd.read_parquet(reopened.path / "points.parquet")
    assert sorted(points["reply_rate_rps"]) == [100.0, 101.0, 102.0]
    assert not list(run.path.glob(".*")) and not list(run.records_dir.glob(".*"))


def test_open_replaces_a_table_that_disagrees_with_its_records(tmp_path: Path):
    run = _new_run(tmp_path)
    run.write_record("aaa", 0, _record("aaa", 0, 100.0, run.run_id))
    run.rebuild_tables()
    run.write_record("aaa", 0, _record("aaa", 0, 250.0, run.run_id))  # killed before the rebuild
    run.write_record("bbb", 0, _record("bbb", 0, 300.0, run.run_id))
    run.close()
    points = pd.read_parquet(RunDir.open(run.path).path / "points.parquet")
    assert sorted(points["reply_rate_rps"]) == [250.0, 300.0]


POINT_KINDS = {  # scenario text, the columns its sweep adds
    "web": ("hot: {conns: 2, rate_rps: 100}\n", set()),
    "stream": ("stream: {conns: 4, mbps: 10}\n", set()),
    "swept": ("topology: {file: topologies/lan.yaml}\nhot: {conns: 2, rate_rps: 100}\n"
              "sweep: {topology.set.links.lan.delay_ms: [0, 5]}\n", {"links_lan_delay_ms"}),
}


def test_every_point_has_the_formats_parameter_columns_in_its_order(tmp_path: Path):
    for name, (text, swept) in POINT_KINDS.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(f"name: {name}\n{text}")
        for point in points(load(path, [])):
            assert tuple(point.columns)[:len(PARAMETER_COLUMNS)] == PARAMETER_COLUMNS
            assert set(point.columns) - set(PARAMETER_COLUMNS) == swept


def test_a_point_cut_short_by_a_lost_worker_is_not_finished_and_a_failed_one_is(tmp_path: Path):
    run = _new_run(tmp_path)
    lost = _record("aaa", 0, 1.0)
    lost["point"].update(valid=False, lost_host="hot-a")
    failed = _record("bbb", 0, 1.0)
    failed["point"].update(valid=False, invalid_reason="the server exited")
    run.write_record("aaa", 0, lost)
    run.write_record("bbb", 0, failed)
    assert run.finished() == {"bbb-r0"}  # the lost one is measured again on resume
