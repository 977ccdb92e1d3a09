"""Draw prepared figure data with matplotlib (Agg, no pyplot state), saved as PNG and SVG."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, ScalarFormatter  # noqa: E402

from harness.analysis.figures import label  # noqa: E402
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
}
PALETTE = (
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)
PANEL_SIZE = (4.2, 3.0)
DPI = 110
NOTE_WIDTH = 90  # characters per line of a figure's notes


def _colors(series: list[str]) -> dict[str, str]:
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(series)}


def _draw_line(ax: Axes, rows: pd.DataFrame, colors: dict[str, str]) -> None:
    for name, line in rows.groupby("series", sort=False):
        line = line.sort_values("x")
        ax.plot(line["x"], line["median"], marker="o", color=colors[name], label=name)
        # min-max over repetitions as plain vertical bars: a quarter of errorbar's artists
        if line["low"].notna().any():
            ax.vlines(line["x"], line["low"], line["high"], color=colors[name], linewidth=0.8)


def _draw_regression(ax: Axes, rows: pd.DataFrame, fits: pd.DataFrame,
                     colors: dict[str, str]) -> None:
    for name, cloud in rows.groupby("series", sort=False):
        ax.scatter(cloud["x"], cloud["median"], s=10, color=colors[name], alpha=0.6)
        fit = fits[fits["series"] == name]
        if fit.empty:
            continue
        xs = pd.Series([cloud["x"].min(), cloud["x"].max()])
        slope, intercept, r = fit[["slope", "intercept", "r"]].iloc[0]
        ax.plot(xs, intercept + slope * xs, color=colors[name],
                label=f"{name}: slope {slope:.3g}, r {r:.2f}")


def _draw_profile(ax: Axes, rows: pd.DataFrame, colors: dict[str, str]) -> None:
    order = rows.groupby("x")["median"].max().sort_values().index.tolist()
    series = list(pd.unique(rows["series"]))
    height = 0.8 / len(series)
    for i, name in enumerate(series):
        bars = rows[rows["series"] == name].set_index("x").reindex(order)["median"].fillna(0)
        positions = [p + i * height for p in range(len(order))]
        ax.barh(positions, bars.to_numpy(), height=height, color=colors[name], label=name)
    ax.set_yticks([p + 0.4 - height / 2 for p in range(len(order))], order, fontsize=7)


def _draw_layers(ax: Axes, rows: pd.DataFrame, colors: dict[str, str]) -> None:
    table = rows.pivot_table(index="x", columns="series", values="median", aggfunc="sum")
    bottom = pd.Series(0.0, index=table.index)
    ticks = [_tick(x) for x in table.index]
    for layer in table.columns:
        ax.bar(ticks, table[layer].fillna(0), bottom=bottom, color=colors[layer], label=layer)
        bottom = bottom + table[layer].fillna(0)


def _tick(value: object) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _thousands(value: float, _pos: int) -> str:
    return f"{value / 1000:g}k"


def _unavailable(ax: Axes, reason: str) -> None:
    ax.text(0.5, 0.5, reason, ha="center", va="center", wrap=True, transform=ax.transAxes,
            fontsize=8, color="#555555")
    ax.set_xticks([])
    ax.set_yticks([])


def _layout(rows: int, cols: int, title_lines: int, legend: bool,
            wide_labels: bool) -> tuple[Figure, list]:
    """A fixed grid in inches: constrained layout would cost half the rendering time."""
    width, height = PANEL_SIZE
    left, right = 1.8 if wide_labels else 0.8, 2.3 if legend else 0.3
    bottom, gap_w, gap_h = 0.5, 0.8, 0.7
    top = 0.45 + 0.17 * title_lines
    fig_w = left + right + cols * width + (cols - 1) * gap_w
    fig_h = top + bottom + rows * height + (rows - 1) * gap_h
    figure = Figure(figsize=(fig_w, fig_h), dpi=DPI)
    axes = figure.subplots(rows, cols, squeeze=False, gridspec_kw={
        "left": left / fig_w, "right": 1 - right / fig_w, "bottom": bottom / fig_h,
        "top": 1 - top / fig_h, "wspace": gap_w / width, "hspace": gap_h / height,
    })
    return figure, axes


def draw(data: FigureData) -> Figure:
    """One panel per (facet, metric); series share colours across panels."""
    spec = data.spec
    metrics = list(spec.y)
    # Rows arrive sorted by the underlying values: keep that order (2048 after 256).
    facets = list(pd.unique(data.frame["facet"])) or ["all"]
    colors = _colors(list(pd.unique(data.frame["series"])))
    # Wrapped to stay within the narrowest (one-panel) figure.
    note_lines = [line for note in data.notes for line in textwrap.wrap(note, NOTE_WIDTH)]
    notes = "\n".join(note_lines)
    legend = spec.kind != "regression" and list(colors) != ["all"]
    with matplotlib.rc_context(STYLE):
        figure, axes = _layout(len(facets), len(metrics), 2 + len(note_lines), legend,
                               wide_labels=spec.kind == "profile")
        for row, facet in enumerate(facets):
            for col, metric in enumerate(metrics):
                ax = axes[row][col]
                if metric in data.unavailable:
                    ax.set_title(label(metric))
                    _unavailable(ax, data.unavailable[metric])
                    continue
                _panel(ax, data, facet, metric, colors)
                if facet != "all":
                    ax.set_title(facet)
        if legend:
            handles, labels = axes[0][0].get_legend_handles_labels()
            figure.legend(handles, labels, loc="upper right")
        figure.suptitle(f"{spec.title}\n{spec.target}" + (f"\n{notes}" if notes else ""),
                        fontsize=9)
    return figure


def _panel(ax: Axes, data: FigureData, facet: str, metric: str, colors: dict[str, str]) -> None:
    spec = data.spec
    rows = data.frame[(data.frame["facet"] == facet) & (data.frame["metric"] == metric)]
    ylabel = label(metric) + data.ylabel_suffix.get(metric, "")
    if spec.kind == "profile":
        _draw_profile(ax, rows, colors)
        ax.set_xlabel(ylabel)
        return
    if spec.kind == "layers":
        _draw_layers(ax, rows, colors)
    elif spec.kind == "regression":
        fits = data.table[(data.table["facet"] == facet) & (data.table["metric"] == metric)]
        _draw_regression(ax, rows, fits, colors)
        ax.legend(fontsize=6)  # each panel has its own fitted lines
    else:
        _draw_line(ax, rows, colors)
        if spec.log_x and rows["x"].min() > 0:
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(ScalarFormatter())
    if spec.kind in ("line", "regression") and not spec.log_x and rows["x"].max() >= 10_000:
        ax.xaxis.set_major_formatter(FuncFormatter(_thousands))  # 250k, not 250000
    ax.set_xlabel(label(spec.x))
    ax.set_ylabel(ylabel)
    if spec.kind == "line" and rows["median"].min() >= 0 and not math.isnan(rows["median"].max()):
        ax.set_ylim(bottom=0)


FORMATS = ("png", "svg")


def render(data: FigureData, out_dir: Path, formats: tuple[str, ...] = FORMATS) -> list[Path]:
    """Write <id>.<format> into out_dir for each format; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    figure = draw(data)
    paths = [out_dir / f"{data.spec.id}.{fmt}" for fmt in formats]
    for path in paths:
        figure.savefig(path)
    return paths
