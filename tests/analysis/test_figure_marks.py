"""What a figure's marks say: invalid points hollow, log axes for spread response times,
legends off the data, error bars named, and the papers' values on their own axis."""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

from harness.analysis import paper_values
from harness.analysis.figures import BY_ID
from harness.analysis.plots import draw
from harness.analysis.prepare import (
    FRAME_COLUMNS,
    PAPER_IN_TABLE_NOTE,
    PAPER_ON_AXES_NOTE,
    FigureData,
    prepare,
)
from harness.analysis.report import write_report
from harness.results.runset import RunSet, read_runs

from .synthetic import make_points, write_run

LATE = ("late sends: 3 of 221 scheduled sends (1.4 %) went out more than 1000 us after their "
        "intended time; the generator fell behind")


def _prepared(spec_id: str, runs: RunSet) -> FigureData:
    result = prepare(BY_ID[spec_id], runs)
    assert isinstance(result, FigureData), result
    return result


def _legend_texts(figure: Figure) -> list[str]:
    return [text.get_text().replace("\n", " ") for text in figure.legends[0].get_texts()]


def _hollow_points(ax: Axes) -> set[tuple[float, float]]:
    return {(float(x), float(y)) for line in ax.get_lines()
            if line.get_markerfacecolor() == "none" and line.get_linestyle() == "None"
            for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)}


def _joined_points(ax: Axes) -> set[tuple[float, float]]:
    """The points a line joins (a gap, NaN, where a point has no valid repetition, is none)."""
    return {(float(x), float(y)) for line in ax.get_lines() if line.get_linestyle() == "-"
            for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True) if y == y}


def test_invalid_repetitions_are_drawn_hollow_never_joined(tmp_path: Path) -> None:
    points = make_points("bmd99-fig8-reply-rate-vs-cold", repetitions=3)
    select = points["dispatch"] == "select"
    one_of_three = select & (points["cold_conns"] == 1000) & (points["repetition"] == 0)
    all_of_them = select & (points["cold_conns"] == 2000)
    points.loc[one_of_three | all_of_them, ["valid", "invalid_reason"]] = [False, LATE]
    figure_data = _prepared("bmd99-fig8", read_runs([write_run(tmp_path, points)]))

    rows = figure_data.frame[figure_data.frame["series"] == "dispatch=select"]
    at_1000 = rows[rows["x"] == 1000].set_index("valid")["median"]
    assert at_1000[False] == pytest.approx(points.loc[one_of_three, "reply_rate_rps"].item())
    assert at_1000[True] == pytest.approx(
        points.loc[select & (points["cold_conns"] == 1000) & ~one_of_three,
                   "reply_rate_rps"].median())
    at_2000 = rows[rows["x"] == 2000]
    assert list(at_2000["valid"]) == [False]  # present, not dropped
    assert "4 point repetition(s) invalid: late sends (hollow)" in figure_data.notes

    figure = draw(figure_data)
    ax = figure.axes[0]
    hollow = {(x, round(y)) for x, y in _hollow_points(ax)}
    joined = {(x, round(y)) for x, y in _joined_points(ax)}
    assert (1000.0, round(at_1000[False])) in hollow
    assert (1000.0, round(at_1000[True])) in joined  # the same point, valid repetitions
    only_invalid = (2000.0, round(at_2000["median"].item()))
    assert only_invalid in hollow and only_invalid not in joined
    assert "hollow: invalid repetitions (see the report)" in _legend_texts(figure)


def _frame(metric_spans: dict[str, float]) -> pd.DataFrame:
    """Two series per metric, from 0.1 up to 0.1 x span."""
    rows = [{"facet": "all", "series": f"dispatch={d}", "metric": metric, "x": x,
             "valid": True, "median": value, "low": value * 0.9, "high": value}
            for metric, span in metric_spans.items()
            for d in ("select", "epoll")
            for x, value in ((1000.0, 0.1), (2000.0, 0.1 * span ** 0.5), (3000.0, 0.1 * span))]
    return pd.DataFrame(rows, columns=FRAME_COLUMNS)


def test_response_times_spanning_decades_get_a_log_axis() -> None:
    spec = BY_ID["bmd99-fig9"]  # three response times in ms
    spans = {"resp_time_mean_ms": 1000.0, "resp_time_p99_ms": 3.0,
             "resp_time_uncorrected_p99_ms": 20.0}
    figure = draw(FigureData(spec, _frame(spans)))
    scales = {ax.get_ylabel(): ax.get_yscale() for ax in figure.axes}
    assert scales == {"mean response time [ms]": "log", "p99 response time [ms]": "linear",
                      "p99 response time, uncorrected [ms]": "linear"}


def test_a_metric_not_in_ms_stays_linear_whatever_its_span() -> None:
    figure = draw(FigureData(BY_ID["bmd99-fig8"], _frame({"reply_rate_rps": 1000.0})))
    assert figure.axes[0].get_yscale() == "linear"


def _overlaps(a: Bbox, b: Bbox) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def _assert_legends_clear(figure: Figure) -> None:
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    legends = [*figure.legends, *(ax.get_legend() for ax in figure.axes if ax.get_legend())]
    titles = [figure._suptitle, *(ax.title for ax in figure.axes)]
    assert legends
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for ax in figure.axes:
            assert not _overlaps(box, ax.get_window_extent(renderer)), legend
        for title in titles:
            if title is not None and title.get_text():
                assert not _overlaps(box, title.get_window_extent(renderer)), title.get_text()


def test_a_legend_of_many_series_stays_off_the_data_and_titles(tmp_path: Path) -> None:
    grid = {"cold_conns": [252, 6000], "dispatch": ["select", "poll", "devpoll", "epoll", "rtsig"],
            "accept": ["single", "multi"], "offered_rate_rps": [1000.0, 2000.0, 3000.0]}
    for seed, release in enumerate(("6.1.0-long-kernel-release", "6.18.0-long-kernel-release")):
        write_run(tmp_path, make_points("cm01-fig6-9-vs-rate", grid, repetitions=2, seed=seed,
                                        kernel_release=release))
    figure_data = _prepared("cm01-fig6-9", read_runs([tmp_path]))
    assert figure_data.frame["series"].nunique() == 20
    _assert_legends_clear(draw(figure_data))


def test_regression_fit_legends_stay_off_the_data(tmp_path: Path) -> None:
    points = make_points("bm98-fig3-6-naive-vs-realistic", repetitions=2)
    figure_data = _prepared("bm98-tables-4-5", read_runs([write_run(tmp_path, points)]))
    _assert_legends_clear(draw(figure_data))


@pytest.mark.parametrize(("spec_id", "scenario", "said"), [
    ("bm98-ufalloc", "bm98-ufalloc", "bars: min–max over 4 repetitions"),
    ("bm98-fig9", "bm98-fig9-saturation-vs-cold", "medians over 4 repetitions); no bars"),
    ("cpp-fig5", "cpp-fig5-cpp-vs-connections", "bars: min–max over 4 repetitions"),
])
def test_notes_say_what_bars_and_values_are_over_how_many_repetitions(
    tmp_path: Path, spec_id: str, scenario: str, said: str
) -> None:
    points = make_points(scenario, repetitions=4)
    figure_data = _prepared(spec_id, read_runs([write_run(tmp_path, points)]))
    assert any(said in note for note in figure_data.notes), figure_data.notes


def test_the_bar_legend_names_the_range_of_repetitions(tmp_path: Path) -> None:
    points = make_points("bm98-ufalloc", repetitions=3)
    points = points[~((points["cold_conns"] == 0) & (points["repetition"] == 2))]
    figure_data = _prepared("bm98-ufalloc", read_runs([write_run(tmp_path, points)]))
    assert figure_data.bars == "bars: min–max over 2–3 repetitions"
    assert "bars: min–max over 2–3 repetitions" in _legend_texts(draw(figure_data))


def _paper(figure: str, facet: str, metric: str, xs: list[object],
           series: tuple[str, ...] = ("dispatch=select",), scale: str = "absolute",
           values: tuple[float, ...] = (100.0, 200.0, 300.0)) -> pd.DataFrame:
    rows = [{"figure": figure, "facet": facet, "series": name, "metric": metric, "x": x,
             "value": value, "scale": scale, "source": "Fig. 8",
             "read_off": name.endswith("select"), "note": "a test value", "paper": "bmd99"}
            for name in series for x, value in zip(xs, values, strict=False)]
    return pd.DataFrame(rows, columns=[*paper_values.COLUMNS, "paper"])


def _paper_lines(ax: Axes) -> set[tuple[float, ...]]:
    """The y values of the paper's lines on one axes (dotted, never our round marker)."""
    return {tuple(line.get_ydata()) for line in ax.get_lines()
            if line.get_linestyle() == ":" and line.get_marker() != "o"}


@pytest.fixture
def fig8_runs(tmp_path: Path) -> RunSet:
    points = make_points("bmd99-fig8-reply-rate-vs-cold", repetitions=2)
    return read_runs([write_run(tmp_path, points)])


def _with_paper(monkeypatch: pytest.MonkeyPatch, spec_id: str, paper: pd.DataFrame) -> None:
    monkeypatch.setattr(paper_values, "for_figure",
                        lambda other: paper if other == spec_id else paper.iloc[0:0])


def test_paper_values_in_our_units_sit_on_our_axis(
    fig8_runs: RunSet, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    paper = _paper("bmd99-fig8", "all", "reply_rate_rps", [0, 1000, 2000],
                   series=("dispatch=select", "dispatch=epoll"))
    _with_paper(monkeypatch, "bmd99-fig8", paper)
    figure_data = _prepared("bmd99-fig8", fig8_runs)
    assert PAPER_ON_AXES_NOTE in figure_data.notes
    figure = draw(figure_data)
    assert len(figure.axes) == 1  # no second axis at another scale
    assert _paper_lines(figure.axes[0]) == {(100.0, 200.0, 300.0)}
    markers = {line.get_marker() for line in figure.axes[0].get_lines()
               if line.get_linestyle() == ":"}
    assert len(markers) == 2 and "o" not in markers  # one per paper series, none of ours
    assert figure.axes[0].get_ylim()[1] >= 300.0  # never cut off by our values' limits
    legend = _legend_texts(figure)
    assert "paper: select, read off its plot" in legend
    assert "paper: epoll, printed" in legend

    report = html.unescape(write_report(fig8_runs, [figure_data], tmp_path).read_text())
    assert "paper's values" in report
    assert "read off a plot" in report and "Fig. 8" in report


def test_a_change_the_paper_gives_starts_from_our_first_point(
    fig8_runs: RunSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the paper's "drops by 44 %" is drawn the way the check compares: our 0-cold value × 0.56
    paper = _paper("bmd99-fig8", "all", "reply_rate_rps", [0, 2000],
                   series=("dispatch=select",), scale="ratio_to_first", values=(1.0, 0.56))
    _with_paper(monkeypatch, "bmd99-fig8", paper)
    figure_data = _prepared("bmd99-fig8", fig8_runs)
    ours = figure_data.frame
    first = ours[(ours["series"] == "dispatch=select") & ours["valid"]].sort_values("x")
    start = first["median"].iloc[0]
    figure = draw(figure_data)
    [(y0, y1)] = _paper_lines(figure.axes[0])
    assert (y0, y1) == pytest.approx((start, 0.56 * start))
    assert len(figure.axes) == 1


def test_counts_in_other_units_get_a_right_axis(
    fig8_runs: RunSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    paper = _paper("bmd99-fig8", "all", "reply_rate_rps", [0, 1000, 2000], scale="other_units")
    _with_paper(monkeypatch, "bmd99-fig8", paper)
    figure = draw(_prepared("bmd99-fig8", fig8_runs))
    assert len(figure.axes) == 2
    twin = figure.axes[1]
    assert twin.get_ylabel() == "paper: reply rate [replies/s]"
    assert _paper_lines(twin) == {(100.0, 200.0, 300.0)}
    assert _paper_lines(figure.axes[0]) == set()


def test_a_rate_the_paper_names_is_a_line_across_every_panel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paper = _paper("bmd99-fig9", "all", "offered_rate_rps", [1348], series=("dispatch=epoll",),
                   values=(1348.0,))
    _with_paper(monkeypatch, "bmd99-fig9", paper)
    points = make_points("bmd99-fig9-resp-time-vs-rate", repetitions=2)
    figure = draw(_prepared("bmd99-fig9", read_runs([write_run(tmp_path, points)])))
    panels = [ax for ax in figure.axes if ax.get_visible()]
    assert len(panels) == 3
    for ax in panels:
        assert any(tuple(line.get_xdata()) == (1348.0, 1348.0) for line in ax.get_lines())


def test_no_paper_values_no_right_axis(fig8_runs: RunSet,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paper_values, "for_figure",
                        lambda spec_id: _paper(spec_id, "all", "x", []).iloc[0:0])
    figure_data = _prepared("bmd99-fig8", fig8_runs)
    figure = draw(figure_data)
    assert len(figure.axes) == 1
    assert _paper_lines(figure.axes[0]) == set()
    assert not any(text.startswith("paper") for text in _legend_texts(figure))
    # the paper's words, where it gives no number, and nothing else about the paper
    assert [note for note in figure_data.notes if "paper" in note] == [
        "no paper values drawn: the text gives words only, "
        + BY_ID["bmd99-fig8"].words_only]


def test_paper_values_go_to_their_facet_only(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    paper = _paper("bm98-fig3-5", "reply_bytes=8192", "resp_time_mean_ms", [200.0, 1000.0])
    monkeypatch.setattr(paper_values, "for_figure", lambda spec_id: paper)
    points = make_points("bm98-fig3-6-naive-vs-realistic", repetitions=2)
    figure = draw(_prepared("bm98-fig3-5", read_runs([write_run(tmp_path, points)])))
    drawn = {ax.get_title(): _paper_lines(ax) for ax in figure.axes if ax.get_visible()}
    assert drawn["reply 8192 bytes"] == {(100.0, 200.0)}
    assert drawn["reply 1259 bytes"] == set()


def test_paper_values_with_nothing_of_ours_to_sit_beside_go_to_the_report_table(
    tmp_path: Path,
) -> None:
    # a run that did not trace the kernel: no panel to draw the paper's 53 % on
    points = make_points("bm98-fig1-select-cpu-vs-cold", repetitions=2, kernel_trace=False)
    runs = read_runs([write_run(tmp_path, points)])
    figure_data = _prepared("bm98-fig1", runs)
    assert PAPER_IN_TABLE_NOTE in figure_data.notes and figure_data.paper_on_axes.empty
    assert len(draw(figure_data).axes) == 1
    report = html.unescape(write_report(runs, [figure_data], tmp_path).read_text())
    assert "up to 53% of the system's CPU time" in report and "not measured" in report
