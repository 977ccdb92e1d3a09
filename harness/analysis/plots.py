"""Draw prepared figure data with matplotlib (Agg, no pyplot state), saved as PNG, SVG and PDF."""

from __future__ import annotations

import dataclasses
import math
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.artist import Artist  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.colors import to_hex, to_rgb  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.font_manager import FontProperties  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.textpath import text_to_path  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    FuncFormatter,
    LogFormatter,
    NullLocator,
    ScalarFormatter,
)

from harness.analysis.figures import label, readable  # noqa: E402
from harness.analysis.prepare import FigureData  # noqa: E402

STYLE = {
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.labelsize": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.fontsize": 8,
    "legend.frameon": False,
    "lines.linewidth": 1.4,
    "lines.markersize": 4,
    "svg.hashsalt": "wanbench",  # stable SVG ids: regenerated figures diff cleanly
    "pdf.fonttype": 42,  # TrueType in the PDF: text a journal's checks and editors accept
}
# No grey: grey is the paper's (read off a plot) and the legend's keys.
PALETTE = (
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
    "#8c564b", "#e377c2", "#637939", "#bcbd22", "#17becf",
)
# Shades of one hue: from this much toward black (negative) to this much toward white
SHADE_RANGE = (-0.35, 0.5)
KEY_COLOR = "#555555"  # legend keys that stand for every series (bars, hollow markers)
INVALID_ALPHA = 0.6
# The paper's values: black when printed in its text or a table, grey when read off its plot.
PAPER_COLORS = {False: "black", True: "#8a8a8a"}
PAPER_MARKERS = ("s", "^", "D", "v", "P", "X", "<", ">")  # one per paper series; ours are "o"
# A paper's table drawn as bars: its series hatched white bars, told apart by the hatch
PAPER_HATCHES = ("////", "....", "xxxx", "\\\\")
BAR_GROUP_WIDTH = 0.8  # of one table row's slot on the x axis
BAR_YLABEL = "share of the CPU's time [%]"
BAR_TOP = 118  # % of the CPU's time: 100 and a bar's value label above it
# A response time (ms) whose positive values span more than this factor is drawn on a log
# axis: on a linear one, every point below saturation sits on zero beside the overloaded ones.
LOG_SPAN = 30.0
# 1/(1-p) of the percentiles a latency spectrum is ticked at: 50, 90, 99, 99.9 ... %
SPECTRUM_TICKS = (2, 10, 100, 1_000, 10_000, 100_000, 1_000_000)
# A CDF's y axis runs to p99.9999: its last point (every response, fraction 1) sits there.
TAIL_FLOOR = 1e-6
PANEL_SIZE = (4.2, 3.0)  # one panel's data area
WRAP_COLUMNS = 3  # panels per row when one facet has more metrics than this
PANEL_LABELS_IN = (0.8, 0.75)  # its tick labels, axis labels and title
DPI = 110
UNAVAILABLE_WIDTH = 50  # characters per line of why a panel is empty
TITLE_FONT_SIZE = 9
# The paper's words under the title: a line as wide as the panels, at about this many
# inches per character of the title's font
TITLE_CHAR_IN = 0.55 * TITLE_FONT_SIZE / 72
# Figure size: constrained layout fits everything into the figure, so the figure is sized
# for what sits beside the panels (legends, right axes) from these estimates.
TITLE_LINE_IN = 0.17
LEGEND_LINE_IN = 0.19
LEGEND_WIDTH = 48  # characters per line of a legend entry (paper series names are long)
LEGEND_HANDLE_IN = 0.6
TWIN_AXIS_IN = 0.7  # a right axis' ticks and label
MARGIN_IN = 0.3  # around the title
PANEL_PAD_IN = 0.08  # around each panel's labels
FIT_FONT_SIZE = 6


@dataclass(frozen=True)
class Look:
    """How a figure looks: matplotlib's settings and one panel's data area in inches."""

    rc: dict[str, object]
    panel_size: tuple[float, float]
    dpi: int = DPI


LOOKS = {
    "screen": Look(STYLE, PANEL_SIZE),
    # a paper's single column (3.3-3.5 in): a one-panel figure fits it, in a serif face at
    # the size of a caption
    "paper": Look({**STYLE, "font.family": "serif", "font.serif": ["DejaVu Serif"],
                   "mathtext.fontset": "dejavuserif", "font.size": 7, "axes.titlesize": 7,
                   "axes.labelsize": 7, "xtick.labelsize": 6, "ytick.labelsize": 6,
                   "legend.fontsize": 6, "lines.linewidth": 1.0, "lines.markersize": 3},
                  (2.6, 1.9), dpi=300),  # a PNG for print
}


def _shade(color: str, step: int, steps: int) -> str:
    """The step-th of `steps` shades of color, from darker to lighter (step 0 of 1: itself)."""
    if steps == 1:
        return color
    amount = SHADE_RANGE[0] + (SHADE_RANGE[1] - SHADE_RANGE[0]) * step / (steps - 1)
    toward = 1.0 if amount > 0 else 0.0  # white, or black
    rgb = [c + (toward - c) * abs(amount) for c in to_rgb(color)]
    return to_hex(rgb)


def _colors(series: list[str]) -> dict[str, str]:
    """One hue per value of the first series column (the sweep's main axis), shades of it
    for the other columns' values: related series look related."""
    main = {name: name.split(", ")[0] for name in series}
    values = dict.fromkeys(main.values())
    hues = {value: PALETTE[i % len(PALETTE)] for i, value in enumerate(values)}
    members = {value: [n for n in series if main[n] == value] for value in hues}
    return {name: _shade(hues[main[name]], members[main[name]].index(name),
                         len(members[main[name]]))
            for name in series}


def log_y(metric: str, frame: pd.DataFrame) -> bool:
    """The one rule for log y axes: a metric in ms whose positive values span > LOG_SPAN.

    Judged over every panel of the metric, so that its panels share one kind of axis.
    """
    if not metric.endswith("_ms"):
        return False
    rows = frame[frame["metric"] == metric]
    values = pd.to_numeric(pd.concat([rows["median"], rows["low"], rows["high"]]),
                           errors="coerce")
    positive = values[values > 0]
    return not positive.empty and positive.max() > LOG_SPAN * positive.min()


def _marks(color: str, valid: bool) -> dict[str, object]:
    """Valid medians: filled markers on a line. Invalid ones measure no capacity: hollow,
    fainter and never joined to the line."""
    if valid:
        return {"marker": "o", "color": color}
    return {"marker": "o", "color": color, "markerfacecolor": "none", "linestyle": "none",
            "alpha": INVALID_ALPHA}


def _with_gaps(line: pd.DataFrame, xs: pd.Series) -> pd.DataFrame:
    """A series' valid points at every x the series has, NaN where the point is invalid: the
    line breaks there instead of joining its neighbours across a point it did not measure."""
    return pd.DataFrame({"x": sorted(set(xs))}).merge(line, on="x", how="left")


def _draw_line(ax: Axes, rows: pd.DataFrame, colors: dict[str, str]) -> None:
    for (name, valid), line in rows.groupby(["series", "valid"], sort=False):
        line = line.sort_values("x")
        color = colors[name]
        shown = _with_gaps(line, rows.loc[rows["series"] == name, "x"]) if valid else line
        ax.plot(shown["x"], shown["median"], **_marks(color, valid))
        # min-max over repetitions as plain vertical bars: a quarter of errorbar's artists
        if line["low"].notna().any():
            ax.vlines(line["x"], line["low"], line["high"], color=color, linewidth=0.8,
                      linestyles="solid" if valid else "dashed",
                      alpha=1.0 if valid else INVALID_ALPHA)


def _fit_label(series: str, slope: float, r: float) -> str:
    return f"{readable(series)}: slope {slope:.3g}, r {r:.2f}"


def _draw_regression(ax: Axes, rows: pd.DataFrame, fits: pd.DataFrame, slopes: pd.DataFrame,
                     colors: dict[str, str]) -> None:
    for (name, valid), cloud in rows.groupby(["series", "valid"], sort=False):
        ax.plot(cloud["x"], cloud["median"], markersize=3,
                **{**_marks(colors[name], valid), "linestyle": "none"})
    for name, cloud in rows[rows["valid"]].groupby("series", sort=False):
        fit = fits[fits["series"] == name]
        if fit.empty:
            continue
        xs = pd.Series([cloud["x"].min(), cloud["x"].max()])
        slope, intercept, r = fit[["slope", "intercept", "r"]].iloc[0]
        ax.plot(xs, intercept + slope * xs, color=colors[name], label=_fit_label(name, slope, r))
    # The paper's lines fit a 1998 live proxy's 20-100 req/s: their slopes, in the units of
    # ours, are named in the legend; where they meet idle = 0 is drawn (its x-intercepts)
    for _, row in slopes.iterrows():
        ax.plot([], [], color=PAPER_COLORS[bool(row["read_off"])], linestyle=":",
                label=_paper_slope_label(row))


def _draw_bars(ax: Axes, data: FigureData, facet: str, colors: dict[str, str]) -> None:
    """A paper's table: one group per y column (a row of the table), in it a bar per series
    of ours (median, min-max bars) and per series of the paper's (hatched, as printed),
    each labelled with its value; a value of ours not measured says so where its bar would
    stand."""
    metrics = list(data.spec.y)
    rows = data.frame[data.frame["facet"] == facet]
    # a point's valid repetitions where it has any, else its invalid ones (drawn fainter)
    ours = rows.sort_values("valid").drop_duplicates(["series", "metric"], keep="last")
    paper = data.paper_on_axes[data.paper_on_axes["facet"].isin((facet, "all"))]
    sets = [("ours", name) for name in colors] + [("paper", s) for s in _paper_bar_series(data)]
    width = BAR_GROUP_WIDTH / len(sets)
    for i, (whose, key) in enumerate(sets):
        xs = np.arange(len(metrics)) - BAR_GROUP_WIDTH / 2 + (i + 0.5) * width
        if whose == "ours":
            mine = ours[ours["series"] == key].set_index("metric").reindex(metrics)
            heights = mine["median"].astype(float)
            errors = [heights - mine["low"].astype(float), mine["high"].astype(float) - heights]
            bars = ax.bar(xs, heights.fillna(0), width, color=colors[key], yerr=errors,
                          error_kw={"elinewidth": 0.8, "ecolor": KEY_COLOR})
            for bar, valid in zip(bars, mine["valid"], strict=True):
                bar.set_alpha(1.0 if valid is True else INVALID_ALPHA)
            labels = ["not measured" if math.isnan(h) else f"{h:.3g}" for h in heights]
        else:
            series, read_off = key
            theirs = paper[paper["series"] == series].set_index("metric").reindex(metrics)
            heights = theirs["y"].astype(float)
            hatch = PAPER_HATCHES[(i - len(colors)) % len(PAPER_HATCHES)]
            bars = ax.bar(xs, heights.fillna(0), width, facecolor="white", hatch=hatch,
                          edgecolor=PAPER_COLORS[read_off])
            labels = ["" if math.isnan(h) else f"{h:g}" for h in heights]
        ax.bar_label(bars, labels, fontsize=FIT_FONT_SIZE, rotation=90, padding=2)
    names = [label(metric).partition(" [")[0] for metric in metrics]
    ax.set_xticks(np.arange(len(metrics)), ["\n".join(textwrap.wrap(n, 24)) for n in names])
    ax.grid(axis="x", visible=False)
    # below the groups: the point measured, or why some value of ours was not
    why = dict.fromkeys(data.unavailable[m] for m in metrics if m in data.unavailable)
    at = ", ".join(readable(f"{data.spec.x}={x:g}") for x in sorted(set(rows["x"])))
    ax.set_xlabel("\n".join(textwrap.wrap("; ".join(why) or at, UNAVAILABLE_WIDTH)))
    # shares of one CPU's time, idle included: the table's whole, and room for the labels
    ax.set_ylim(0, BAR_TOP)
    ax.set_yticks(range(0, 101, 20))


def _thousands(value: float, _pos: int) -> str:
    return f"{value / 1000:g}k"


def _unavailable(ax: Axes, reason: str) -> None:
    # Wrapped here: matplotlib's wrap=True wraps at the figure's edge, not the panel's.
    ax.text(0.5, 0.5, "\n".join(textwrap.wrap(reason, UNAVAILABLE_WIDTH)), ha="center",
            va="center", transform=ax.transAxes, fontsize=8, color="#555555")
    ax.set_xticks([])
    ax.set_yticks([])


def _paper_label(series: str, read_off: bool) -> str:
    how = "read off its plot" if read_off else "printed"
    return f"paper: {readable(series)}, {how}" if series != "all" else f"paper, {how}"


def _paper_markers(data: FigureData) -> dict[str, str]:
    series = pd.unique(data.paper_on_axes["series"])
    return {name: PAPER_MARKERS[i % len(PAPER_MARKERS)] for i, name in enumerate(series)}


def _paper_bar_series(data: FigureData) -> list[tuple[str, bool]]:
    """(series, read_off) of the paper's table, each a set of bars of its own."""
    drawn = data.paper_on_axes[["series", "read_off"]].drop_duplicates()
    return list(drawn.itertuples(index=False, name=None))


def _bar_legend(data: FigureData, colors: dict[str, str]) -> list[tuple[Artist, str]]:
    entries: list[tuple[Artist, str]] = [
        (Patch(color=color), "ours" if name == "all" else f"ours: {readable(name)}")
        for name, color in colors.items()]
    if data.bars:
        entries.append((Line2D([], [], color=KEY_COLOR, marker="|", markersize=9,
                               linestyle="none"), data.bars))
    entries += [(Patch(facecolor="white", edgecolor=PAPER_COLORS[read_off],
                       hatch=PAPER_HATCHES[i % len(PAPER_HATCHES)]),
                 _paper_label(series, read_off))
                for i, (series, read_off) in enumerate(_paper_bar_series(data))]
    return entries


def _legend(data: FigureData, colors: dict[str, str],
            markers: dict[str, str]) -> tuple[list[Artist], list[str]]:
    """Our series, what bars and hollow markers mean, and the paper's series: built from the
    data, so that a series drawn only hollow or in one panel is still named."""
    if data.spec.kind == "bars":
        return _wrapped(_bar_legend(data, colors))
    entries: list[tuple[Artist, str]] = [
        (Line2D([], [], marker="o", color=color),
         "ours" if name == "all" else readable(name))
        for name, color in colors.items()
    ]
    if data.bars:
        entries.append((Line2D([], [], color=KEY_COLOR, marker="|", markersize=9,
                               linestyle="none"), data.bars))
    if not data.frame["valid"].all():
        hollow = Line2D([], [], marker="o", color=KEY_COLOR, markerfacecolor="none",
                        linestyle="none")
        entries.append((hollow, "hollow: invalid repetitions (see the report)"))
    drawn = data.paper_on_axes[["series", "read_off"]].drop_duplicates()
    for series, read_off in drawn.itertuples(index=False):
        # on a regression's axes the paper's values are where its idle line meets 0
        what = ": its idle line's x-intercept" if data.spec.kind == "regression" else ""
        entries.append((Line2D([], [], color=PAPER_COLORS[read_off], marker=markers[series],
                               linestyle=":", linewidth=0.8),
                        _paper_label(series, read_off) + what))
    return _wrapped(entries)


def _wrapped(entries: list[tuple[Artist, str]]) -> tuple[list[Artist], list[str]]:
    return ([handle for handle, _ in entries],
            ["\n".join(textwrap.wrap(text, LEGEND_WIDTH)) for _, text in entries])


def _text_width(lines: list[str], font_size: float) -> float:
    """Inches taken by the widest of the lines (each may hold several, one per '\\n')."""
    font = FontProperties(size=font_size)
    widths = (text_to_path.get_text_width_height_descent(line, font, ismath=False)[0]
              for text in lines for line in text.split("\n"))
    return max(widths, default=0.0) / 72


def _legend_entry_width(labels: list[str], font_size: float) -> float:
    return _text_width(labels, font_size) + LEGEND_HANDLE_IN


def _paper_slopes(data: FigureData) -> pd.DataFrame:
    """The paper's regression slopes (paper_values' scale slope), named beside our fits."""
    return data.paper[data.paper["scale"] == "slope"]


def _paper_slope_label(row: pd.Series) -> str:
    return f"paper ({row['source']}), {readable(row['series'])}: slope {row['value']:g}"


def _fit_labels(data: FigureData) -> list[str]:
    if data.spec.kind != "regression":
        return []
    return [*(_fit_label(s, slope, r) for s, slope, r in
              data.table[["series", "slope", "r"]].itertuples(index=False)),
            *(_paper_slope_label(row) for _, row in _paper_slopes(data).iterrows())]


def _figure_size(data: FigureData, rows: int, cols: int, title: str,
                 legend_labels: list[str], look: Look) -> tuple[tuple[float, float], int]:
    """(width, height) in inches, and the legend's columns: panels with what sits beside
    them, the legend below them, the title above, never narrower than these."""
    width, height = (size + labels for size, labels in zip(look.panel_size, PANEL_LABELS_IN,
                                                           strict=True))
    if (data.paper_on_axes["scale"] == "other_units").any():
        width += TWIN_AXIS_IN
    fits = _fit_labels(data)
    if fits:
        width += _legend_entry_width(fits, FIT_FONT_SIZE)
    title_width = _text_width([title], TITLE_FONT_SIZE) + MARGIN_IN
    figure_width = max(cols * width, title_width)
    entry = _legend_entry_width(legend_labels, float(look.rc["legend.fontsize"]))
    columns = max(1, min(len(legend_labels), int(figure_width // entry)))
    lines_per_entry = max((text.count("\n") + 1 for text in legend_labels), default=0)
    legend_height = math.ceil(len(legend_labels) / columns) * lines_per_entry * LEGEND_LINE_IN
    title_height = (title.count("\n") + 2) * TITLE_LINE_IN
    figure_height = rows * height + legend_height + title_height
    return (figure_width, figure_height), columns


def draw(data: FigureData, look: str = "screen") -> Figure:
    """One panel per (facet, metric); series share colours across panels; `look` one of LOOKS.

    Constrained layout keeps the legend (outside, below), right axes and titles off the data.
    """
    spec = data.spec
    # a table's rows are groups of bars in one panel, named by its first column's
    metrics = list(spec.y) if spec.kind != "bars" else [spec.y[0]]
    # Rows arrive sorted by the underlying values: keep that order (2048 after 256).
    facets = list(pd.unique(data.frame["facet"])) or ["all"]
    colors = _colors(list(pd.unique(data.frame["series"])))
    markers = _paper_markers(data)
    if len(facets) == 1 and len(metrics) > WRAP_COLUMNS:
        # many metrics of one facet: rows of WRAP_COLUMNS panels, not one long strip
        rows, cols = math.ceil(len(metrics) / WRAP_COLUMNS), WRAP_COLUMNS
        cells = [(facets[0], m, i // cols, i % cols) for i, m in enumerate(metrics)]
    else:
        rows, cols = len(facets), len(metrics)
        cells = [(f, m, r, c) for r, f in enumerate(facets) for c, m in enumerate(metrics)]
    # One short title: the notes are the report's, written once below the figure. Where the
    # paper's text gives words, not numbers, for what is drawn, they stand under the title.
    title = spec.title
    if spec.words_only:
        panels_in = cols * (LOOKS[look].panel_size[0] + PANEL_LABELS_IN[0])
        title += "\n" + "\n".join(textwrap.wrap(
            f"paper, in words only: {spec.words_only}", int(panels_in / TITLE_CHAR_IN)))
    with matplotlib.rc_context(LOOKS[look].rc):
        # the keys inside the look: a Line2D takes its marker size and width when made
        handles, labels = _legend(data, colors, markers)
        size, columns = _figure_size(data, rows, cols, title, labels, LOOKS[look])
        figure = Figure(figsize=size, dpi=LOOKS[look].dpi, layout="constrained")
        # A right axis' label otherwise nearly touches the next panel's left one.
        figure.get_layout_engine().set(w_pad=PANEL_PAD_IN, h_pad=PANEL_PAD_IN)
        axes = figure.subplots(rows, cols, squeeze=False)
        for ax in axes.flat[len(cells):]:
            ax.set_visible(False)
        for facet, metric, row, col in cells:
            ax = axes[row][col]
            if spec.kind == "bars" and set(spec.y) <= set(data.unavailable):
                _unavailable(ax, "; ".join(dict.fromkeys(data.unavailable.values())))
                continue
            if metric in data.unavailable and spec.kind != "bars":
                ax.set_title(label(metric))
                _unavailable(ax, data.unavailable[metric])
                continue
            _panel(ax, data, facet, metric, colors, markers, LOOKS[look])
            if facet != "all":
                ax.set_title(readable(facet))
        # Below the panels: beside them, it would run into the title and notes, which
        # constrained layout centres over the whole figure.
        figure.legend(handles, labels, loc="outside lower center", ncols=columns)
        figure.suptitle(title, fontsize=TITLE_FONT_SIZE)
    return figure


class _PlainLogFormatter(LogFormatter):
    """Labels the ticks LogFormatter would (minor ones within a decade or two), written as
    0.1, 0.3, 10 rather than 10^-1 or 3e-01."""

    def _num_to_string(self, x: float, vmin: float, vmax: float) -> str:
        return f"{x:g}"


def _scale_y(ax: Axes, values: pd.Series, log: bool, from_zero: bool) -> None:
    if log:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(_PlainLogFormatter())
        ax.yaxis.set_minor_formatter(_PlainLogFormatter(labelOnlyBase=False))
    elif from_zero and values.min() >= 0 and not math.isnan(values.max()):
        ax.set_ylim(bottom=0)


def _draw_paper_line(ax: Axes, rows: pd.DataFrame, markers: dict[str, str]) -> None:
    for (series, read_off), group in rows.groupby(["series", "read_off"], sort=False):
        group = group.sort_values("x")
        # unclipped: a value on the axis' edge (an x-intercept, idle = 0) shows whole
        ax.plot(group["x"], group["y"], color=PAPER_COLORS[read_off], marker=markers[series],
                linestyle=":", linewidth=0.8, clip_on=False)


def _draw_paper_positions(ax: Axes, rows: pd.DataFrame, markers: dict[str, str]) -> None:
    """Rates the paper names (a saturation load): vertical lines, told apart by the marker
    at their top."""
    for row in rows.itertuples(index=False):
        color = PAPER_COLORS[row.read_off]
        ax.axvline(row.y, color=color, linestyle=":", linewidth=0.8)
        ax.plot([row.y], [1.0], transform=ax.get_xaxis_transform(), color=color,
                marker=markers[row.series], clip_on=False)


def _draw_paper(ax: Axes, rows: pd.DataFrame, x: str, metric: str, markers: dict[str, str],
                log: bool, from_zero: bool) -> None:
    """The paper's values on our axis where the units agree (paper_values' scale); counts in
    other units on a right axis of their own, whose magnitudes do not compare with ours."""
    _draw_paper_positions(ax, rows[rows["metric"] == x], markers)
    values = rows[rows["metric"] == metric]
    _draw_paper_line(ax, values[values["scale"] != "other_units"], markers)
    own = values[values["scale"] == "other_units"]
    if own.empty:
        return
    twin = ax.twinx()
    twin.grid(False)
    twin.spines["right"].set_visible(True)
    _draw_paper_line(twin, own, markers)
    twin.set_ylabel("paper: " + label(metric))
    _scale_y(twin, own["y"], log, from_zero)


def _paper_rows(data: FigureData, facet: str, metric: str) -> pd.DataFrame:
    """The paper's values for one panel: its metric's, and positions on the x axis."""
    paper = data.paper_on_axes
    return paper[paper["metric"].isin((metric, data.spec.x)) & paper["facet"].isin((facet, "all"))]


def _percentile_axis(ax: Axes) -> None:
    """x = 1/(1-p) on a log scale, ticked at the percentiles readers quote (HdrHistogram's
    percentile spectrum)."""
    ax.set_xscale("log")
    ticks = [t for t in SPECTRUM_TICKS if t <= ax.get_xlim()[1]]
    ax.set_xticks(ticks, [f"{100 * (1 - 1 / t):g}%" for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())


def _tail_fraction(fraction: np.ndarray) -> np.ndarray:
    """p -> log10(1/(1-p)): 0.9 -> 1, 0.99 -> 2; the last fraction (1) just past the top."""
    return -np.log10(np.clip(1.0 - np.asarray(fraction, dtype=float), TAIL_FLOOR, None))


def _tail_axis(ax: Axes) -> None:
    """A CDF's fraction of responses on the percentile spectrum's scale, 1/(1-p) in decades
    (wrk2's and HdrHistogram's): p90, p99 and p99.9 a decade apart, not squashed into the top
    2 % of a linear axis."""
    ax.set_yscale("function", functions=(_tail_fraction,
                                          lambda tail: 1.0 - np.power(10.0, -tail)))
    top = max(t for t in SPECTRUM_TICKS if t <= 1 / TAIL_FLOOR)
    ticks = [0.0] + [1 - 1 / t for t in SPECTRUM_TICKS if t <= top]
    ax.set_yticks(ticks, [f"{100 * t:g}%" for t in ticks])
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_ylim(0.0, 1.0 - TAIL_FLOOR)


def _panel(ax: Axes, data: FigureData, facet: str, metric: str, colors: dict[str, str],
           markers: dict[str, str], look: Look) -> None:
    spec = data.spec
    rows = data.frame[(data.frame["facet"] == facet) & (data.frame["metric"] == metric)]
    ylabel = label(metric) + data.ylabel_suffix.get(metric, "")
    paper = _paper_rows(data, facet, metric)
    if spec.kind == "bars":
        _draw_bars(ax, data, facet, colors)
        ax.set_ylabel(BAR_YLABEL)
        return
    if spec.kind == "regression":
        fits = data.table[(data.table["facet"] == facet) & (data.table["metric"] == metric)]
        slopes = _paper_slopes(data)
        slopes = slopes[(slopes["metric"] == metric) & slopes["facet"].isin((facet, "all"))]
        _draw_regression(ax, rows, fits, slopes, colors)
        # Each panel has its own fitted lines: their legend sits right of the panel (and of
        # its right axis), where constrained layout keeps room for it.
        twin = (paper["scale"] == "other_units").any()
        beside = 1.02 + (TWIN_AXIS_IN / look.panel_size[0] if twin else 0.0)
        ax.legend(loc="upper left", bbox_to_anchor=(beside, 1.0), borderaxespad=0,
                  fontsize=FIT_FONT_SIZE)
    else:
        _draw_line(ax, rows, colors)
        if spec.kind == "spectrum":
            _percentile_axis(ax)
        elif spec.kind == "cdf":
            if rows["x"].min() > 0:
                ax.set_xscale("log")  # response times span decades: 0.1, 1, 10 ms
                ax.xaxis.set_major_formatter(_PlainLogFormatter())
            _tail_axis(ax)
        elif spec.log_x and rows["x"].min() > 0:
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(ScalarFormatter())
    if spec.source == "timeseries" and not data.frame.empty:
        # each sample covers [t, t + 1): the axis spans the window, even of a 2 s run, and
        # every panel the same window (the samplers' last second ends before the generator's)
        ax.set_xlim(0, data.frame["x"].max() + 1)
    if spec.kind in ("line", "regression") and not spec.log_x and rows["x"].max() >= 10_000:
        ax.xaxis.set_major_formatter(FuncFormatter(_thousands))  # 250k, not 250000
    ax.set_xlabel(label(spec.x))
    ax.set_ylabel(ylabel)
    # a spectrum's tail spans decades whatever the run: always log, one rule for every run
    log = spec.kind == "spectrum" or log_y(metric, data.frame)
    # a line's and a regression's y from 0 where ours are never below (CPU idle and busy %)
    from_zero = spec.kind in ("line", "regression")
    if spec.kind == "cdf":
        return  # its y axis is the tail's (_tail_axis), not a metric's
    # the paper's values first: a y limit set from ours alone would cut theirs off
    if not paper.empty:
        _draw_paper(ax, paper, spec.x, metric, markers, log, from_zero)
    _scale_y(ax, rows["median"], log, from_zero)


# With no layout engine and these off, savefig draws a figure once per format.
NO_LAYOUT = {"figure.autolayout": False, "figure.constrained_layout.use": False}


def lay_out(figure: Figure) -> None:
    """Place the panels, legend and title once, as constrained layout would in savefig, and
    keep them there: savefig with a layout engine first draws the whole figure without output
    to lay it out, which doubled the drawing of every format."""
    figure.get_layout_engine().execute(figure)
    with matplotlib.rc_context(NO_LAYOUT):
        figure.set_layout_engine(None)


FORMATS = ("png", "svg", "pdf")
# PDF on request (--format pdf): it adds about a third to a figure's drawing time.
DEFAULT_FORMATS = ("png", "svg")


def panels(data: FigureData) -> list[FigureData]:
    """Each (facet, metric) panel of data as a figure of its own (`wanbench plot
    --panel-files`: a paper's single column takes one panel, not a grid), with the series,
    paper values and fits of that panel only; its id FIGURE--METRIC[--FACET]."""
    facets = list(pd.unique(data.frame["facet"])) or ["all"]
    out = []
    for facet in facets:
        for metric in data.spec.y:
            rows = data.frame[(data.frame["facet"] == facet) & (data.frame["metric"] == metric)]
            if rows.empty and metric not in data.unavailable:
                continue
            ident = f"{data.spec.id}--{metric}" + (
                "" if facet == "all" else "--" + re.sub(r"[^\w.=-]+", "_", facet))
            paper = data.paper_on_axes
            out.append(dataclasses.replace(
                data, spec=dataclasses.replace(data.spec, id=ident, y=(metric,)), frame=rows,
                unavailable={m: why for m, why in data.unavailable.items() if m == metric},
                paper_on_axes=paper[paper["metric"].isin((metric, data.spec.x))
                                    & paper["facet"].isin((facet, "all"))]))
    return out


def render(data: FigureData, out_dir: Path, formats: tuple[str, ...] = DEFAULT_FORMATS,
           look: str = "screen") -> list[Path]:
    """Write <id>.<format> into out_dir for each format; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    figure = draw(data, look)
    paths = [out_dir / f"{data.spec.id}.{fmt}" for fmt in formats]
    with matplotlib.rc_context(STYLE):  # svg.hashsalt is read when the SVG is written
        lay_out(figure)
        for path in paths:
            figure.savefig(path)
    return paths
