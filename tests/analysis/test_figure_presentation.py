"""What a researcher pastes into a paper (#33): one short title, readable legends, no panel
of zeros, related series in related colours, one axis rule for spectra, a time series of a
short run on its whole window, vector output."""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib
import pandas as pd
import pytest
from matplotlib.colors import rgb_to_hsv, to_rgb
from matplotlib.figure import Figure

from harness.analysis.figures import BY_ID, readable
from harness.analysis.generic import specs_for
from harness.analysis.plots import STYLE, _colors, draw, panels, render
from harness.analysis.prepare import FigureData, prepare
from harness.results.runset import RunSet, read_runs

from .conftest import run_command
from .synthetic import make_points, write_run

GRID = {"dispatch": ["select", "epoll"], "cold_conns": [0, 1000]}


def _runs(tmp_path: Path, points: pd.DataFrame) -> RunSet:
    return read_runs([write_run(tmp_path, points)])


def _prepared(spec_id: str, runs: RunSet) -> FigureData:
    result = prepare(BY_ID[spec_id], runs)
    assert isinstance(result, FigureData), result
    return result


def test_labels_read_as_a_reader_says_them() -> None:
    assert readable("dispatch=epoll, cold_conns=750") == "epoll, 750 cold (idle) connections"
    assert readable("one_way_delay_ms=10") == "one-way delay 10 ms"
    assert readable("all") == "all"


def test_a_figure_has_one_short_title_and_its_notes_stay_in_the_report(tmp_path: Path) -> None:
    points = make_points("bmd99-fig9-resp-time-vs-rate", repetitions=2)
    data = _prepared("bmd99-fig9", _runs(tmp_path, points))
    assert data.notes  # there is something to say ...
    figure = draw(data)
    title = figure._suptitle.get_text()
    assert title == BY_ID["bmd99-fig9"].title and "\n" not in title  # ... but not here
    legend = [text.get_text() for text in figure.legends[0].get_texts()]
    assert "select" in legend and not any("dispatch=" in text for text in legend)


def test_the_errors_panel_is_drawn_only_when_some_error_is_not_zero(tmp_path: Path) -> None:
    points = make_points("my-sweep", GRID, repetitions=2)
    quiet = specs_for("my-sweep", _runs(tmp_path / "quiet", points))
    assert all("errors_total" not in spec.y for spec in quiet)
    noisy = points.assign(errors_total=[0] * (len(points) - 1) + [3])
    loud = specs_for("my-sweep", _runs(tmp_path / "loud", noisy))
    assert any("errors_total" in spec.y for spec in loud)


def test_series_of_one_main_value_share_a_hue_in_shades() -> None:
    names = ["dispatch=epoll, cold_conns=0", "dispatch=epoll, cold_conns=1000",
             "dispatch=select, cold_conns=0", "dispatch=select, cold_conns=1000"]
    colors = _colors(names)
    hue = {name: float(rgb_to_hsv(to_rgb(color))[0]) for name, color in colors.items()}

    def same_hue(a: str, b: str) -> bool:
        apart = abs(hue[a] - hue[b])
        return min(apart, 1 - apart) < 0.02  # hue is an angle: red sits at 0 and at 1

    assert same_hue(names[0], names[1]) and colors[names[0]] != colors[names[1]]
    assert same_hue(names[2], names[3]) and colors[names[2]] != colors[names[3]]
    assert not same_hue(names[0], names[2])
    assert len(set(_colors(["select", "poll", "epoll"]).values())) == 3  # one column: hues


def _generic(tmp_path: Path, points: pd.DataFrame, source: str) -> FigureData:
    runs = _runs(tmp_path, points)
    [spec] = [s for s in specs_for("my-sweep", runs) if s.source == source
              and s.kind != "cdf"]
    result = prepare(spec, runs)
    assert isinstance(result, FigureData), result
    return result


def test_every_spectrum_has_a_log_response_time_axis(tmp_path: Path) -> None:
    # a spectrum whose values span less than a decade: log all the same, as for any run
    data = _generic(tmp_path, make_points("my-sweep", GRID, repetitions=1), "latency")
    narrow = data.frame.assign(median=1.0 + data.frame["x"].rank(pct=True))
    figure = draw(FigureData(data.spec, narrow))
    assert {ax.get_yscale() for ax in figure.axes if ax.get_visible()} == {"log"}


def test_a_short_runs_time_series_spans_its_window(tmp_path: Path) -> None:
    data = _generic(tmp_path, make_points("my-sweep", GRID, repetitions=1), "timeseries")
    # a 2 s run: one sample a second, at 0 and 1; before, one dot on an axis of 0.96-1.04
    short = data.frame[data.frame["x"] <= 1]
    figure = draw(FigureData(data.spec, short))
    panels = [ax for ax in figure.axes if ax.get_visible() and ax.get_lines()]
    assert panels
    for ax in panels:
        assert ax.get_xlim() == (0.0, 2.0)


def test_pdf_is_written_beside_png_and_svg_when_asked(tmp_path: Path) -> None:
    data = _prepared("bmd99-fig8", _runs(tmp_path, make_points(
        "bmd99-fig8-reply-rate-vs-cold", repetitions=1)))
    assert [p.suffix for p in render(data, tmp_path / "default")] == [".png", ".svg"]
    paths = render(data, tmp_path / "figures", ("png", "svg", "pdf"))
    assert [p.suffix for p in paths] == [".png", ".svg", ".pdf"]
    assert paths[2].read_bytes().startswith(b"%PDF")


@pytest.mark.parametrize("look", ["screen", "paper"])
def test_each_format_is_drawn_once_in_the_layout_savefig_would_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, look: str
) -> None:
    # a regression figure: fitted lines' legends beside the panels, the figure's legend below
    data = _prepared("bm98-tables-4-5", _runs(tmp_path, make_points(
        "bm98-fig3-6-naive-vs-realistic", repetitions=2)))
    figure, laid_out_by_savefig = draw(data, look), io.BytesIO()
    with matplotlib.rc_context(STYLE):
        figure.savefig(laid_out_by_savefig, format="png")
    drawn_with = []
    draw_figure = Figure.draw

    def counted(figure: Figure, renderer: object) -> None:
        drawn_with.append(type(renderer).__name__)
        draw_figure(figure, renderer)

    monkeypatch.setattr(Figure, "draw", counted)
    png, _svg = render(data, tmp_path / "figures", look=look)
    # the PNG, then the SVG (a vector backend's renderer comes wrapped): no draw without
    # output to lay the figure out
    assert drawn_with == ["RendererAgg", "MixedModeRenderer"]
    assert png.read_bytes() == laid_out_by_savefig.getvalue()  # the same pixels


def test_a_figure_whose_paper_gives_words_only_says_so(tmp_path: Path) -> None:
    fig8 = _prepared("bmd99-fig8", _runs(tmp_path / "8", make_points(
        "bmd99-fig8-reply-rate-vs-cold", repetitions=1)))
    assert any("words only" in note and "independently" in note for note in fig8.notes)
    # and in the image, under the title: the paper's words where it gives no number
    title = draw(fig8)._suptitle.get_text()
    assert title.startswith(BY_ID["bmd99-fig8"].title + "\npaper, in words only: ")
    assert "performs independently of the number of cold" in title.replace("\n", " ")
    fig9 = _prepared("bm98-fig9", _runs(tmp_path / "9", make_points(
        "bm98-fig9-saturation-vs-cold", repetitions=1)))
    assert not fig9.paper_on_axes.empty  # -44 % and -14 % drawn
    assert not any("words only" in note for note in fig9.notes)
    assert draw(fig9)._suptitle.get_text() == BY_ID["bm98-fig9"].title


def test_the_paper_style_fits_a_single_column(tmp_path: Path) -> None:
    data = _prepared("bm98-fig9", _runs(tmp_path, make_points(
        "bm98-fig9-saturation-vs-cold", repetitions=1)))
    screen, paper = draw(data), draw(data, "paper")
    width = paper.get_size_inches()[0]
    assert width <= 3.5 < screen.get_size_inches()[0]  # a column of a two-column paper
    assert paper.axes[0].xaxis.label.get_fontfamily() == ["serif"]


@pytest.mark.parametrize("look", ["screen", "paper"])
def test_the_legend_keys_are_drawn_as_the_data_are(tmp_path: Path, look: str) -> None:
    """A key's marker and line as large as the series' own, in each look."""
    data = _prepared("bmd99-fig8", _runs(tmp_path, make_points(
        "bmd99-fig8-reply-rate-vs-cold", repetitions=2)))
    figure = draw(data, look)
    drawn = {line.get_color(): line for ax in figure.axes for line in ax.get_lines()
             if line.get_marker() == "o"}
    keys = [handle for handle in figure.legends[0].legend_handles
            if handle.get_marker() == "o" and handle.get_color() in drawn]
    assert keys
    for key in keys:
        line = drawn[key.get_color()]
        assert (key.get_markersize(), key.get_linewidth()) == (line.get_markersize(),
                                                                line.get_linewidth())


def test_plot_writes_the_formats_asked_for_and_refuses_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "results", make_points("bmd99-fig8-reply-rate-vs-cold",
                                                      repetitions=1))
    out = tmp_path / "report"
    argv = ["plot", str(run), "--out", str(out), "--figures", "papers", "--format", "svg",
            "--style", "paper"]
    assert run_command("harness.commands.plot", argv) == 0
    assert sorted(p.name for p in (out / "figures").iterdir()) == ["bmd99-fig8.png",
                                                                   "bmd99-fig8.svg"]
    report = (out / "index.html").read_text()
    assert "bmd99-fig8.svg" in report and "bmd99-fig8.pdf" not in report
    with pytest.raises(SystemExit) as exit_:
        run_command("harness.commands.plot", [*argv[:-4], "--format", "eps"])
    assert exit_.value.code == 2
    assert "unknown format eps: choose from png, svg, pdf" in capsys.readouterr().err


def test_a_line_breaks_at_an_invalid_point_instead_of_joining_across_it(
        tmp_path: Path) -> None:
    grid = {"dispatch": ["select"], "cold_conns": [0, 1000, 2000]}
    points = make_points("my-sweep", grid, repetitions=1)
    points.loc[points["cold_conns"] == 1000, "valid"] = False
    runs = _runs(tmp_path, points)
    [spec] = [s for s in specs_for("my-sweep", runs) if s.x == "cold_conns"]
    data = prepare(spec, runs)
    assert isinstance(data, FigureData)
    ax = draw(data).axes[0]
    joined = [line for line in ax.get_lines() if line.get_linestyle() != "None"]
    assert len(joined) == 1
    xs, ys = joined[0].get_data()
    assert list(xs) == [0, 1000, 2000] and pd.isna(ys[1])  # a gap, not a straight line
    assert not pd.isna(ys[0]) and not pd.isna(ys[2])
    # a series valid everywhere is one unbroken line (the other direction)
    whole = _runs(tmp_path / "whole", make_points("my-sweep", grid, repetitions=1))
    data = prepare(spec, whole)
    assert isinstance(data, FigureData)
    (line,) = [ln for ln in draw(data).axes[0].get_lines() if ln.get_linestyle() != "None"]
    assert not pd.isna(line.get_data()[1]).any()


def test_the_cdf_reads_its_tail_on_the_spectrums_scale(tmp_path: Path) -> None:
    runs = _runs(tmp_path, make_points("my-sweep", GRID, repetitions=1))
    [spec] = [s for s in specs_for("my-sweep", runs) if s.kind == "cdf"]
    data = prepare(spec, runs)
    assert isinstance(data, FigureData)
    panels = [ax for ax in draw(data).axes if ax.get_visible() and ax.get_lines()]
    assert panels
    for ax in panels:
        ticks = [t.get_text() for t in ax.get_yticklabels()]
        assert ticks[:5] == ["0%", "50%", "90%", "99%", "99.9%"]
        # p99 sits a decade above p90 (as far as p90 above p0), not squashed at the top
        to_axis = ax.transScale.transform
        p0, p90, p99 = (to_axis((1.0, p))[1] for p in (0.0, 0.9, 0.99))
        assert abs((p99 - p90) - (p90 - p0)) < 1e-9


def test_every_time_series_panel_spans_one_window(tmp_path: Path) -> None:
    data = _generic(tmp_path, make_points("my-sweep", GRID, repetitions=1), "timeseries")
    # the server's sampler ends a second before the generator: its panel spans as far
    last = data.frame["x"].max()
    shorter = data.frame[~((data.frame["metric"] == "server_proc.cpu_pct")
                           & (data.frame["x"] == last))]
    figure = draw(FigureData(data.spec, shorter))
    panels = [ax for ax in figure.axes if ax.get_visible() and ax.get_lines()]
    assert len(panels) >= 2 and {ax.get_xlim() for ax in panels} == {(0.0, last + 1)}


def test_each_panel_can_be_a_file_of_its_own_for_a_papers_column(tmp_path: Path) -> None:
    """A 5-panel grid in the paper look was 10 in wide: each panel alone fits a column."""
    run = write_run(tmp_path / "results", make_points("my-sweep", GRID, repetitions=1))
    out = tmp_path / "report"
    assert run_command("harness.commands.plot", [
        "plot", str(run), "--out", str(out), "--style", "paper", "--format", "pdf",
        "--panel-files"]) == 0
    runs = read_runs([run])
    [spec] = [s for s in specs_for("my-sweep", runs) if s.x == "cold_conns"]
    data = _prepared_spec(spec, runs)
    assert draw(data, "paper").get_size_inches()[0] > 3.5  # the grid: wider than a column
    files = sorted(p.name for p in (out / "panels").glob(f"{spec.id}--*.pdf"))
    assert files == sorted(f"{spec.id}--{metric}.pdf" for metric in spec.y)
    for panel in panels(data):
        figure = draw(panel, "paper")
        assert figure.get_size_inches()[0] <= 3.5
        assert len([ax for ax in figure.axes if ax.get_visible()]) == 1


def _prepared_spec(spec, runs: RunSet) -> FigureData:
    result = prepare(spec, runs)
    assert isinstance(result, FigureData), result
    return result
