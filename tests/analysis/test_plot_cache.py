"""wanbench plot's cache (harness.analysis.cache) and its worker processes: what a run's files
and the figure files on disk say is taken from the cache, anything changed is made afresh, and
figures drawn in parallel are the ones drawn one by one."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from harness.analysis import report
from harness.analysis.cache import Cache
from harness.analysis.figures import BY_ID
from harness.analysis.prepare import FigureData
from harness.results.runset import read_runs

from .synthetic import make_points, write_run

SCENARIO = "bm98-ufalloc"  # its paper figure is small: a few seconds to draw on a busy machine
FIGURE = BY_ID[SCENARIO]


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return write_run(tmp_path / "results", make_points(SCENARIO, repetitions=2))


@pytest.fixture
def prepared(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the figures prepare() was asked for (not taken from the cache)."""
    calls: list[str] = []
    real = report.prepare

    def counting(spec, runs):  # noqa: ANN001, ANN202
        calls.append(spec.id)
        return real(spec, runs)

    monkeypatch.setattr(report, "prepare", counting)
    return calls


def _plot(run: Path, out: Path, cache: Cache, jobs: int = 1) -> dict[str, FigureData]:
    results = report.plot_all(read_runs([run]), out, (FIGURE,), jobs=jobs, cache=cache)
    return {r.spec.id: r for r in results if isinstance(r, FigureData)}


def _figure_files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "figures").iterdir())}


def test_unchanged_run_is_taken_from_the_cache_and_not_drawn_again(
        run: Path, tmp_path: Path, prepared: list[str]) -> None:
    cache, out = Cache(tmp_path / "cache"), tmp_path / "out"
    first = _plot(run, out, cache)
    assert sorted(prepared) == sorted(first) and first
    drawn = {p.name: p.stat().st_mtime_ns for p in (out / "figures").iterdir()}
    prepared.clear()
    again = _plot(run, out, cache)
    assert prepared == []  # every figure's data from the cache
    assert {p.name: p.stat().st_mtime_ns for p in (out / "figures").iterdir()} == drawn
    for spec_id, data in first.items():
        pd.testing.assert_frame_equal(again[spec_id].frame, data.frame)
    assert (out / "index.html").is_file()


def test_a_changed_run_file_is_prepared_and_drawn_afresh(
        run: Path, tmp_path: Path, prepared: list[str]) -> None:
    cache, out = Cache(tmp_path / "cache"), tmp_path / "out"
    before = _plot(run, out, cache)
    pngs = _figure_files(out)
    points = pd.read_parquet(run / "points.parquet")
    points["kernel_accept_ns_per_call"] *= 2  # same size, same shape: only the content differs
    points.to_parquet(run / "points.parquet", index=False)
    prepared.clear()
    after = _plot(run, out, cache)
    assert prepared == [FIGURE.id]
    # the figure's metric, accept's in-kernel time per call, doubled
    assert list(after[FIGURE.id].frame["median"]) == pytest.approx(
        [2 * v for v in before[FIGURE.id].frame["median"]])
    assert _figure_files(out)[f"{FIGURE.id}.png"] != pngs[f"{FIGURE.id}.png"]


def test_a_figure_file_replaced_since_it_was_drawn_is_drawn_again(
        run: Path, tmp_path: Path, prepared: list[str]) -> None:
    cache, out = Cache(tmp_path / "cache"), tmp_path / "out"
    _plot(run, out, cache)
    png = out / "figures" / f"{FIGURE.id}.png"
    original = png.read_bytes()
    png.write_bytes(b"not the figure")
    prepared.clear()
    _plot(run, out, cache)
    assert prepared == []  # its data still from the cache
    assert png.read_bytes() == original


def test_without_reading_the_cache_every_figure_is_made_afresh(
        run: Path, tmp_path: Path, prepared: list[str]) -> None:
    out = tmp_path / "out"
    first = _plot(run, out, Cache(tmp_path / "cache"))
    prepared.clear()
    _plot(run, out, Cache(tmp_path / "cache", read=False))
    assert sorted(prepared) == sorted(first)


def test_drawing_in_parallel_gives_the_figures_drawn_one_by_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")  # the SVGs' date: otherwise today's
    runs = [write_run(tmp_path / "results", make_points(SCENARIO, repetitions=2)),
            write_run(tmp_path / "results",
                      make_points("bmd99-fig8-reply-rate-vs-cold", repetitions=2))]
    papers = report.applicable(read_runs(runs), generic=False)
    serial = report.plot_all(read_runs(runs), tmp_path / "serial", papers, jobs=1,
                             cache=Cache(tmp_path / "cache-serial"))
    parallel = report.plot_all(read_runs(runs), tmp_path / "parallel", papers, jobs=2,
                               cache=Cache(tmp_path / "cache-parallel"))
    assert [r.spec.id for r in parallel] == [r.spec.id for r in serial]
    files = _figure_files(tmp_path / "serial")
    assert len(files) == 4 and _figure_files(tmp_path / "parallel") == files
    assert ((tmp_path / "parallel" / "index.html").read_text()
            == (tmp_path / "serial" / "index.html").read_text())


def test_a_run_read_from_its_records_is_not_cached(tmp_path: Path, prepared: list[str]) -> None:
    run = write_run(tmp_path / "results", make_points(SCENARIO, repetitions=2),
                    with_parquet=False)
    cache = Cache(tmp_path / "cache")
    _plot(run, tmp_path / "out", cache)
    prepared.clear()
    _plot(run, tmp_path / "out", cache)
    assert prepared == [FIGURE.id]  # no fingerprint: nothing to key its figures by
    assert not (tmp_path / "cache").exists()
