"""`wanbench plot` and `wanbench reproduce --check` on damaged run directories: one line naming
the damaged file and the fix, exit 2, never a traceback; an undamaged run is read."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from tests.analysis.conftest import run_command
from tests.analysis.synthetic import make_points, write_run

FIG8 = "bmd99-fig8-reply-rate-vs-cold"


def fig8_run(root: Path) -> Path:
    points = make_points(FIG8, {"dispatch": ["select", "epoll"], "cold_conns": [0, 2000]},
                         noise=0.0)
    return write_run(root, points)


def garbage(name: str) -> Callable[[Path], None]:
    return lambda run: (run / name).write_bytes(os.urandom(3000))


def retyped(table: str, column: str, value: object) -> Callable[[Path], None]:
    def change(run: Path) -> None:
        frame = pd.read_parquet(run / f"{table}.parquet")
        frame[column] = value
        frame.to_parquet(run / f"{table}.parquet", index=False)
    return change


def manifest_as(change: Callable[[dict], object]) -> Callable[[Path], None]:
    def write(run: Path) -> None:
        manifest = json.loads((run / "manifest.json").read_text())
        (run / "manifest.json").write_text(json.dumps(change(manifest)))
    return write


def records_only(record_text: str) -> Callable[[Path], None]:
    """No Parquet tables (a run killed before its first rebuild), and one damaged record."""
    def damage(run: Path) -> None:
        for table in run.glob("*.parquet"):
            table.unlink()
        (run / "points" / "0000000000-r0.json").write_text(record_text)
    return damage


# damage -> what the one line must name
DAMAGED: dict[str, tuple[Callable[[Path], None], tuple[str, ...]]] = {
    "random bytes named points.parquet": (garbage("points.parquet"),
                                          ("points.parquet", "not a Parquet file")),
    "an empty points.parquet": (lambda run: (run / "points.parquet").write_bytes(b""),
                                ("points.parquet", "not a Parquet file")),
    "random bytes named timeseries.parquet": (garbage("timeseries.parquet"),
                                              ("timeseries.parquet", "not a Parquet file")),
    "valid as text": (retyped("points", "valid", "yes"), ("points.parquet", "valid", "'yes'")),
    "a sweep axis as text": (retyped("points", "cold_conns", "many"),
                             ("points.parquet", "cold_conns", "'many'")),
    "a metric as text": (retyped("points", "reply_rate_rps", "fast"),
                         ("points.parquet", "reply_rate_rps", "'fast'")),
    "repetition as text": (retyped("points", "repetition", "first"),
                           ("points.parquet", "repetition")),
    "histogram counts as text": (retyped("histograms", "count", "lots"),
                                 ("histograms.parquet", "count")),
    "profile shares as text": (retyped("profiles", "pct", "half"), ("profiles.parquet", "pct")),
    "manifest a number": (manifest_as(lambda m: 3), ("manifest.json", "not a JSON object")),
    "manifest not text": (lambda run: (run / "manifest.json").write_bytes(b"\xa5\xff" * 20),
                          ("manifest.json", "not valid JSON")),
    "manifest scenario a list": (manifest_as(lambda m: {**m, "scenario": [1]}),
                                 ("manifest.json", "scenario")),
    "manifest parameters a number": (manifest_as(lambda m: {**m, "parameters": 5}),
                                     ("manifest.json", "parameters")),
    "a truncated record, no tables": (records_only('{"point": {"run_'),
                                      ("0000000000-r0.json", "not valid JSON")),
    "a record with a wrong key, no tables": (records_only('{"pt": {}}'),
                                             ("0000000000-r0.json", '"point"')),
}


def one_line(err: str, *phrases: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for phrase in phrases:
        assert phrase in lines[0], (phrase, lines[0])


@pytest.mark.parametrize("damage", DAMAGED)
def test_a_damaged_run_is_refused_in_one_line(tmp_path: Path, capsys, damage: str):
    run = fig8_run(tmp_path / "results")
    change, phrases = DAMAGED[damage]
    change(run)
    capsys.readouterr()
    assert run_command("harness.commands.plot", ["plot", str(run), "--figures", "papers",
                                                 "--out", str(tmp_path / "figures")]) == 2
    one_line(capsys.readouterr().err, "wanbench plot:", *phrases)
    assert run_command("harness.commands.reproduce",
                       ["reproduce", "--check", str(tmp_path / "results")]) == 2
    one_line(capsys.readouterr().err, "wanbench reproduce:", *phrases)


def test_the_undamaged_run_is_plotted_and_checked(tmp_path: Path, capsys):
    fig8_run(tmp_path / "results")
    assert run_command("harness.commands.plot", ["plot", str(tmp_path / "results"),
                                                 "--figures", "papers",
                                                 "--out", str(tmp_path / "figures")]) == 0
    assert (tmp_path / "figures" / "index.html").is_file()
    assert run_command("harness.commands.reproduce",
                       ["reproduce", "--check", str(tmp_path / "results")]) in (0, 1)
    assert not capsys.readouterr().err


def interrupted_before_its_first_point(root: Path) -> Path:
    points = make_points(FIG8, {"dispatch": ["select"], "cold_conns": [0]}, noise=0.0,
                         run_id="20260101T000000-6.18.0-synthetic")
    run = write_run(root, points)
    for table in run.glob("*.parquet"):
        table.unlink()
    for record in (run / "points").glob("*.json"):
        record.unlink()
    return run


def test_a_folder_skips_a_run_without_points_saying_why(tmp_path: Path, capsys):
    fig8_run(tmp_path / "results")
    empty = interrupted_before_its_first_point(tmp_path / "results")
    assert run_command("harness.commands.plot", ["plot", str(tmp_path / "results"),
                                                 "--figures", "papers",
                                                 "--out", str(tmp_path / "figures")]) == 0
    said = capsys.readouterr()
    assert f"skipped {empty}: no finished point" in said.out and not said.err
    # named on its own, the same run is refused: there is nothing to plot
    assert run_command("harness.commands.plot", ["plot", str(empty), "--figures", "papers",
                                                 "--out", str(tmp_path / "figures")]) == 2
    one_line(capsys.readouterr().err, "wanbench plot:", "no finished points")
