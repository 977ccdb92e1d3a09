"""Figures and a report for any run, not only the papers' scenarios."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.generic import export_hgrm, point_table, specs_for, swept
from harness.analysis.prepare import FigureData, labelled, prepare
from harness.results.runset import read_runs

from .conftest import run_command
from .synthetic import make_points, write_run

TWO_AXES = {"dispatch": ["select", "epoll"], "cold_conns": [0, 1000, 2000],
            "offered_rate_rps": [500.0, 1000.0]}


def test_a_hand_written_sweep_gets_a_figure_per_numeric_axis_and_a_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "results", make_points("my-sweep", TWO_AXES, repetitions=2))
    out = tmp_path / "new" / "report"  # --out need not exist
    assert run_command("harness.commands.plot", ["plot", str(run), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    # only the figures that apply: no line for any paper figure
    figures = ["my-sweep--cold_conns", "my-sweep--offered_rate_rps", "my-sweep--latency",
               "my-sweep--latency-cdf", "my-sweep--timeseries"]
    assert printed.splitlines()[:-1] == [f"wrote {figure}" for figure in figures]
    report = (out / "index.html").read_text()
    for figure in figures:
        for suffix in ("png", "svg"):
            assert (out / "figures" / f"{figure}.{suffix}").stat().st_size > 0
        assert f"figures/{figure}.png" in report
    assert "points: medians over valid repetitions" in report


def test_the_axes_are_the_parameters_that_vary_and_categories_become_series(
    tmp_path: Path,
) -> None:
    runs = read_runs([write_run(tmp_path, make_points("my-sweep", TWO_AXES, repetitions=2))])
    assert swept(runs) == ["dispatch", "cold_conns", "offered_rate_rps"]
    by_x = {spec.x: spec for spec in specs_for("my-sweep", runs) if spec.source == "points"}
    assert set(by_x) == {"cold_conns", "offered_rate_rps"}  # dispatch is not a number
    assert by_x["cold_conns"].series == ("dispatch", "offered_rate_rps")
    assert by_x["cold_conns"].y[:2] == ("reply_rate_rps", "cpu_server_pct")
    # a request/reply run has no stream throughput: no empty panel for it
    assert "stream_throughput_mbps" not in by_x["cold_conns"].y


def test_a_run_where_only_a_category_varies_gets_its_table_but_no_line(tmp_path: Path) -> None:
    grid = {"dispatch": ["select", "poll", "epoll"]}
    runs = read_runs([write_run(tmp_path, make_points("my-apis", grid, repetitions=3))])
    assert swept(runs) == ["dispatch"]
    # no line against an axis: only each point's latency spectrum and time series
    assert [s.kind for s in specs_for("my-apis", runs)] == ["spectrum", "cdf", "line"]
    table = point_table("my-apis", runs)
    assert sorted(table["dispatch"]) == ["epoll", "poll", "select"]
    assert set(table["valid"]) == {"3/3"}
    # select loses replies to its scan in the synthetic model; the medians keep that order
    rates = table.set_index("dispatch")["reply_rate_rps"]
    assert rates["epoll"] >= rates["select"]


def test_the_table_counts_invalid_repetitions_and_leaves_them_out_of_the_medians(
    tmp_path: Path,
) -> None:
    points = make_points("my-sweep", {"cold_conns": [0, 1000]}, repetitions=2)
    invalid = (points["cold_conns"] == 1000) & (points["repetition"] == 1)
    points.loc[invalid, ["valid", "reply_rate_rps"]] = [False, 1e9]
    runs = read_runs([write_run(tmp_path, points)])
    table = point_table("my-sweep", runs).set_index("cold_conns")
    assert table.loc[1000, "valid"] == "1/2" and table.loc[0, "valid"] == "2/2"
    kept = points.loc[(points["cold_conns"] == 1000) & ~invalid, "reply_rate_rps"].iloc[0]
    assert table.loc[1000, "reply_rate_rps"] == pytest.approx(kept)


def _spec(runs, suffix: str):
    (spec,) = [s for s in specs_for("my-sweep", runs) if s.id.endswith(f"--{suffix}")]
    return spec


def test_the_latency_spectrum_runs_from_the_median_to_the_tail_the_count_resolves(
    tmp_path: Path,
) -> None:
    runs = read_runs([write_run(tmp_path, make_points("my-sweep", {"cold_conns": [0, 1000]}))])
    data = prepare(_spec(runs, "latency"), runs)
    assert isinstance(data, FigureData)
    frame = data.frame
    assert set(frame["metric"]) == {"latency_corrected_ms", "latency_uncorrected_ms"}
    for _, curve in frame.groupby(["series", "metric"]):
        assert curve["x"].iloc[0] == pytest.approx(2)  # the median
        # 3 repetitions of 208 values each: the tail reaches 1/(1-p) of the count, no further
        assert 100 < curve["x"].max() <= 3 * 208
        assert curve["median"].is_monotonic_increasing
    # synthetic buckets of 100, 50, 33 and 25 values: the median falls in the second
    # (0.5-1 ms, drawn at its middle), the largest values in the last (5-50 ms)
    median = frame[frame["x"] == frame["x"].min()]["median"]
    assert median.to_numpy() == pytest.approx(0.75, rel=0.01)
    assert frame.groupby("series")["median"].max().to_numpy() == pytest.approx(27.5, rel=0.01)


def test_each_points_spectrum_and_cdf_come_from_its_own_repetitions(tmp_path: Path) -> None:
    run = write_run(tmp_path, make_points("my-sweep", {"cold_conns": [0, 1000]}))
    # the 1,000-idle point's responses 10 times slower than the idle-free point's
    histograms = pd.read_parquet(run / "histograms.parquet")
    points = pd.read_parquet(run / "points.parquet")
    slow = histograms["point_id"].isin(points.loc[points["cold_conns"] == 1000, "point_id"])
    histograms.loc[slow, ["lo_us", "hi_us"]] *= 10
    histograms.to_parquet(run / "histograms.parquet")
    runs = read_runs([run])
    spectrum, cdf = (prepare(_spec(runs, kind), runs) for kind in ("latency", "latency-cdf"))
    assert isinstance(spectrum, FigureData) and isinstance(cdf, FigureData)
    medians = spectrum.frame[spectrum.frame["x"] == spectrum.frame["x"].min()]
    by_series = medians.groupby("series")["median"].agg(["min", "max"])
    assert by_series.loc["cold_conns=0"].to_numpy() == pytest.approx(0.75, rel=0.01)
    assert by_series.loc["cold_conns=1000"].to_numpy() == pytest.approx(7.5, rel=0.01)
    at_half = cdf.frame[cdf.frame["median"] == 0.5].groupby("series")["x"].agg(["min", "max"])
    assert at_half.loc["cold_conns=0"].to_numpy() == pytest.approx(0.75, rel=0.01)
    assert at_half.loc["cold_conns=1000"].to_numpy() == pytest.approx(7.5, rel=0.01)


def test_the_cdf_climbs_to_every_response_and_meets_the_spectrum_at_the_median(
    tmp_path: Path,
) -> None:
    runs = read_runs([write_run(tmp_path, make_points("my-sweep", {"cold_conns": [0, 1000]}))])
    cdf, spectrum = (prepare(_spec(runs, kind), runs) for kind in ("latency-cdf", "latency"))
    assert isinstance(cdf, FigureData) and isinstance(spectrum, FigureData)
    assert set(cdf.frame["metric"]) == {"cdf_corrected", "cdf_uncorrected"}
    for (series, metric), curve in cdf.frame.groupby(["series", "metric"]):
        assert curve["median"].is_monotonic_increasing and curve["x"].is_monotonic_increasing
        assert curve["median"].iloc[0] == pytest.approx(0.01)
        assert curve["median"].iloc[-1] > 0.99
        kind = metric.removeprefix("cdf_")
        at_median = curve.loc[curve["median"] == 0.5, "x"].iloc[0]
        both = spectrum.frame[(spectrum.frame["series"] == series)
                              & (spectrum.frame["metric"] == f"latency_{kind}_ms")]
        assert at_median == both.loc[both["x"].idxmin(), "median"]


def test_samplers_and_generator_share_one_clock_in_the_time_series(tmp_path: Path) -> None:
    run = write_run(tmp_path, make_points("my-sweep", {"cold_conns": [0, 1000]}, repetitions=1))
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["scenario"]["warmup_s"] = 1.0
    (run / "manifest.json").write_text(json.dumps(manifest))
    points = pd.read_parquet(run / "points.parquet")
    keys = points[["run_id", "point_id", "repetition"]]
    # the generator counts seconds from its start; the sampler stamps each sample at the end
    # of its interval, from the end of the warm-up
    generator = [keys.assign(t_s=float(t), source="generator", metric="replies", value=100.0)
                 for t in range(12)]
    sampler = [keys.assign(t_s=t, source="server_proc", metric="cpu_pct", value=50.0)
               for t in (1.0, 2.0, 3.0)]
    pd.concat([*generator, *sampler]).to_parquet(run / "timeseries.parquet", index=False)
    runs = read_runs([run])
    data = prepare(_spec(runs, "timeseries"), runs)
    assert isinstance(data, FigureData)
    x = data.frame.groupby("metric")["x"].apply(lambda s: sorted(set(s)))
    # 1 s of warm-up and a 10 s window: the 12th second is cut short, not drawn as a rate
    assert x["generator.replies"] == [float(t) for t in range(11)]
    assert x["server_proc.cpu_pct"] == [1.0, 2.0, 3.0]  # the seconds after the warm-up
    assert "generator.late" in data.unavailable  # not sampled: said, not drawn as zero


def test_hgrm_files_are_written_per_point_and_kind(tmp_path: Path) -> None:
    points = make_points("my-sweep", {"cold_conns": [0, 1000]}, repetitions=2)
    points.loc[points["cold_conns"] == 1000, "valid"] = False
    runs = read_runs([write_run(tmp_path / "results", points)])
    written = sorted(p.relative_to(tmp_path / "hgrm").as_posix()
                     for p in export_hgrm(runs, tmp_path / "hgrm"))
    assert written == ["my-sweep/cold_conns=0.corrected.hgrm",
                       "my-sweep/cold_conns=0.uncorrected.hgrm",
                       "my-sweep/cold_conns=1000.invalid.corrected.hgrm",
                       "my-sweep/cold_conns=1000.invalid.uncorrected.hgrm"]
    text = (tmp_path / "hgrm" / written[0]).read_text()
    assert text.splitlines()[0].split() == ["Value", "Percentile", "TotalCount", "1/(1-Percentile)"]
    assert "#[Max" in text and "#[Mean" in text
    # the footer in the values' unit (ms), the standard deviation too (not the package's ns)
    mean, stddev = (float(v) for v in
                    re.search(r"Mean\s+=\s*([\d.]+), StdDeviation\s+=\s*([\d.]+)", text).groups())
    values = [float(line.split()[0]) for line in text.splitlines()[1:] if line.strip()
              and not line.startswith("#")]
    assert min(values) <= mean <= max(values)
    assert stddev <= max(values) - min(values)


def test_runs_of_one_kernel_are_series_of_their_own_in_the_time_series(tmp_path: Path) -> None:
    """Two runs of one kernel (an A/A pair) are told apart by run id, a column the time
    series also joins on."""
    grid = {"cold_conns": [0, 1000]}
    runs = read_runs([write_run(tmp_path / "a", make_points("my-sweep", grid, seed=1)),
                      write_run(tmp_path / "b", make_points("my-sweep", grid, seed=2,
                                                            run_id="my-sweep-second"))])
    data = prepare(_spec(runs, "timeseries"), runs)
    assert isinstance(data, FigureData)
    assert {s.split("run_id=")[1] for s in data.frame["series"]} == set(runs.raw_manifests)


def test_overlaid_runs_are_named_by_their_labels(tmp_path: Path, capsys) -> None:
    grid = {"cold_conns": [0, 1000]}
    dirs = [write_run(tmp_path / "a", make_points("my-sweep", grid, seed=1)),
            write_run(tmp_path / "b", make_points("my-sweep", grid, seed=2,
                                                  run_id="my-sweep-second"))]
    runs = labelled(read_runs(dirs), {"my-sweep-second": "patched", **{
        r: "stock" for r in read_runs(dirs[:1]).raw_manifests}})
    data = prepare(_spec(runs, "timeseries"), runs)
    assert isinstance(data, FigureData)
    assert {s.split("run_label=")[1] for s in data.frame["series"]} == {"stock", "patched"}
    assert run_command("harness.commands.plot", [
        "plot", *map(str, dirs), "--out", str(tmp_path / "out"), "--label", "stock",
        "--label", "patched"]) == 0
    svg = (tmp_path / "out" / "figures" / "my-sweep--timeseries.svg").read_text()
    assert "patched" in svg and "my-sweep-second" not in svg
    # one label per run, each a plain name: else exit 2 in one line
    for labels in (["stock"], ["a=b", "c"]):
        argv = ["plot", *map(str, dirs), "--out", str(tmp_path / "bad")]
        argv += [arg for name in labels for arg in ("--label", name)]
        assert run_command("harness.commands.plot", argv) == 2
        assert capsys.readouterr().err.count("\n") == 1
