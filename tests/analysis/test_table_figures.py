"""The papers' tables as a reader of the paper knows them: a CPU profile drawn as bars, ours
beside the paper's per row, on the paper's denominator (the CPU's time); a regression table
as the lines its check fits, with the paper's slopes named beside ours."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from matplotlib.axes import Axes
from matplotlib.container import BarContainer
from matplotlib.patches import Rectangle

from harness.analysis import paper_values
from harness.analysis.derive import KERNEL_LINES
from harness.analysis.figures import BY_ID, CPU_TIME_SHARE
from harness.analysis.plots import draw
from harness.analysis.prepare import FigureData, prepare
from harness.results.format import kernel_column
from harness.results.runset import read_runs

from .synthetic import make_points, write_run


def _prepared(tmp_path: Path, spec_id: str, **make: object) -> FigureData:
    points = make_points(BY_ID[spec_id].scenario, repetitions=2, **make)
    result = prepare(BY_ID[spec_id], read_runs([write_run(tmp_path, points)]))
    assert isinstance(result, FigureData), result
    return result


# BM98 Figs. 3-6's run, both kernels (the synthetic default has select only)
NAIVE_VS_REALISTIC = {"cold_conns": [0, 750], "reply_bytes": [1259, 8192],
                      "dispatch": ["select", "epoll"],
                      "offered_rate_rps": [200.0, 600.0, 1000.0, 1400.0, 1800.0, 2200.0]}


def _bars(ax: Axes) -> list[Rectangle]:
    return [patch for container in ax.containers if isinstance(container, BarContainer)
            for patch in container.patches]


def _labels(ax: Axes) -> list[str]:
    return [text.get_text() for text in ax.texts]


def test_a_profile_table_is_bars_ours_beside_the_papers_per_row(tmp_path: Path) -> None:
    data = _prepared(tmp_path, "bmd99-table2")
    figure = draw(data)
    (ax,) = [ax for ax in figure.axes if ax.get_visible()]
    # one group per row of the table: the dispatch call's share and idle time
    assert [t.get_text().replace("\n", " ") for t in ax.get_xticklabels()] == [
        "dispatch call, in the kernel", "server CPU idle"]
    assert ax.get_ylabel() == "share of the CPU's time [%]"
    # ours (epoll, select) and the paper's three kernels, one bar each per row
    assert len(_bars(ax)) == 5 * 2
    hatched = [bar for bar in _bars(ax) if bar.get_hatch()]
    assert sorted(round(bar.get_height(), 2) for bar in hatched) == [
        0.68, 12.02, 18.09, 33.01, 34.0, 59.01]
    # each bar says its value: the paper's as printed, ours as measured
    ours = data.frame.set_index(["series", "metric"])["median"]
    assert {"34", "0.68", "59.01", f"{ours['dispatch=select', CPU_TIME_SHARE]:.3g}"} <= set(
        _labels(ax))
    legend = [t.get_text().replace("\n", " ") for t in figure.legends[0].get_texts()]
    assert "ours: select" in legend and "paper: epoll, printed" in legend


def test_a_profile_row_ours_lacks_says_not_measured_beside_the_papers_bar(
    tmp_path: Path,
) -> None:
    # BM98 Table 1's ufalloc: the paper's 17.79 % stands, ours says it was not measured
    accept = BY_ID["bm98-table1-2"].y[1]
    points = make_points("bm98-table1-profile", repetitions=2)
    points[[kernel_column("accept", "calls"), kernel_column("accept", "ns_per_call")]] = None
    data = prepare(BY_ID["bm98-table1-2"], read_runs([write_run(tmp_path, points)]))
    assert isinstance(data, FigureData) and accept in data.unavailable
    ax = draw(data).axes[0]
    assert "17.79" in _labels(ax) and "not measured" in _labels(ax)
    assert ax.get_xlabel().replace("\n", " ") == data.unavailable[accept]
    # measured (accept's calls over the window: 12.5 % of one CPU), a bar with its value
    calls = 1000
    points[kernel_column("accept", "calls")] = calls
    points[kernel_column("accept", "ns_per_call")] = (
        0.125 * 1e9 * points["kernel_trace_window_s"] / calls)
    measured = prepare(BY_ID["bm98-table1-2"], read_runs([write_run(tmp_path / "m", points)]))
    ax = draw(measured).axes[0]
    assert "12.5" in _labels(ax) and "not measured" not in _labels(ax)
    assert ax.get_xlabel() == "750 cold (idle) connections"


def test_the_regression_figure_draws_the_lines_its_check_fits(tmp_path: Path) -> None:
    data = _prepared(tmp_path, "bm98-tables-4-5", grid=NAIVE_VS_REALISTIC)
    assert set(data.frame["metric"]) == set(KERNEL_LINES)
    assert set(data.table["series"]) == {"dispatch=select", "dispatch=epoll"}  # 750 cold only
    figure = draw(data)
    for ax in (ax for ax in figure.axes if ax.get_visible()):
        assert ax.get_ylim()[0] == 0  # shares of a CPU: never drawn below 0
        fits = [line for line in ax.get_lines() if line.get_linestyle() == "-"]
        dots = [line for line in ax.get_lines() if line.get_linestyle() == "None"
                and line.get_marker() == "o"]
        # each fitted line spans the points it was fitted to, no further
        for fit in fits:
            same = [dot for dot in dots if dot.get_color() == fit.get_color()]
            xs = [x for dot in same for x in dot.get_xdata()]
            assert (min(fit.get_xdata()), max(fit.get_xdata())) == (min(xs), max(xs))
            assert min(fit.get_ydata()) >= 0
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        # the paper's Table 5 slopes in the metric's own units, beside ours
        assert any(text.startswith("paper (Table 5), select: slope") for text in legend)
        assert any(text.startswith("select: slope") for text in legend)
    # its x-intercepts (idle = 0) on the idle panels, named as such
    assert "paper: select, printed: its idle line's x-intercept" in [
        t.get_text().replace("\n", " ") for t in figure.legends[0].get_texts()]


def test_points_past_the_servers_cpu_are_not_drawn_as_fitted(tmp_path: Path) -> None:
    def fastest_drawn(points: pd.DataFrame, where: Path) -> float:
        data = prepare(BY_ID["bm98-tables-4-5"], read_runs([write_run(where, points)]))
        assert isinstance(data, FigureData), data
        return data.frame["x"].max()

    points = make_points("bm98-fig3-6-naive-vs-realistic", NAIVE_VS_REALISTIC, repetitions=2)
    fastest = fastest_drawn(points, tmp_path / "spare")
    # the same points, the server's CPU used up at the fastest: not on the line, not drawn
    busy = points["request_rate_rps"] >= fastest
    points.loc[busy, "cpu_server_pct"] = 100.0  # of its one CPU
    assert fastest_drawn(points, tmp_path / "busy") < fastest


def test_a_papers_slope_has_no_place_on_the_x_axis() -> None:
    rows = paper_values.for_figure("bm98-tables-4-5")
    slopes = rows[rows["scale"] == "slope"]
    assert not slopes.empty and slopes["x"].isna().all()
    assert rows.loc[rows["scale"] != "slope", "x"].notna().all()  # the x-intercepts stay


@pytest.mark.parametrize("spec_id", ["bm98-fig1", "bm98-table1-2", "bmd99-table2"])
def test_the_papers_cpu_shares_are_drawn_on_the_cpus_time(spec_id: str) -> None:
    # the papers' "% of the CPU" is of the machine's time, idle included: our axis' too
    rows = paper_values.for_figure(spec_id)
    assert CPU_TIME_SHARE in set(rows["metric"])
    assert "kernel_dispatch_share_pct" not in set(rows["metric"])
    assert CPU_TIME_SHARE in BY_ID[spec_id].y
