"""Every figure of some runs, and index.html: each figure (or why it was skipped), its table,
and a summary of the manifests."""

from __future__ import annotations

import html
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd

from harness.analysis.figures import PAPERS, SPECS, FigureSpec
from harness.analysis.generic import GENERIC, generic_specs, point_table
from harness.analysis.numbers import human
from harness.analysis.plots import FORMATS, render
from harness.analysis.prepare import FigureData, Skipped, prepare
from harness.results.runset import RunSet

MANIFEST_COLUMNS = [
    "scenario_name", "run_id", "kernel_release", "created_at", "repetitions", "cpu_model",
    "cpu_count", "topology_backend", "hardware_counters", "git_revision",
]
STYLE = """
body { font-family: sans-serif; max-width: 1300px; margin: 2em auto; color: #222; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1.5em; }
td, th { border: 1px solid #ccc; padding: 2px 6px; text-align: right; }
img { max-width: 100%; }
.skipped { color: #777; }
.note { font-size: 0.85em; color: #555; }
.tables { display: flex; flex-wrap: wrap; gap: 2em; align-items: flex-start; }
h4 { margin: 0.5em 0 0; font-size: 0.9em; }
"""


def table_html(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, float_format=human, na_rep="—", border=0)


PAPER_TABLE_COLUMNS = ["facet", "series", "metric", "x", "value", "source", "how", "note"]


def paper_table(paper: pd.DataFrame) -> pd.DataFrame:
    """The paper's values of one figure as the report lists them: where each comes from and
    whether it was printed or read off a plot."""
    how = paper["read_off"].map({True: "read off a plot", False: "printed"})
    return paper.assign(how=how)[PAPER_TABLE_COLUMNS]


def _tables(result: FigureData) -> str:
    """Our table and the paper's values, side by side."""
    tables = []
    if result.table is not None:
        tables.append(f"<div><h4>ours</h4>{table_html(result.table)}</div>")
    if not result.paper.empty:
        tables.append(f"<div><h4>paper's values</h4>{table_html(paper_table(result.paper))}</div>")
    return f"<div class='tables'>{''.join(tables)}</div>" if tables else ""


def _figure_section(result: FigureData | Skipped, figure_dir: str) -> str:
    spec = result.spec
    head = (f"<h3 id='{spec.id}'>{html.escape(spec.target)}: {html.escape(spec.title)}</h3>"
            f"<p class='note'>scenario <code>{spec.scenario}</code></p>")
    if isinstance(result, Skipped):
        return head + f"<p class='skipped'>skipped: {html.escape(result.reason)}</p>"
    parts = [head, f"<a href='{figure_dir}/{spec.id}.svg'>"
                   f"<img src='{figure_dir}/{spec.id}.png' alt='{spec.id}'></a>"]
    parts += [f"<p class='note'>{html.escape(note)}</p>" for note in result.notes]
    parts.append(_tables(result))
    return "\n".join(parts)


def write_report(runs: RunSet, results: list[FigureData | Skipped], out_dir: Path,
                 figure_dir: str = "figures") -> Path:
    """Write out_dir/index.html referring to figures under out_dir/figure_dir."""
    sections = ["<!doctype html><meta charset='utf-8'><title>wanbench report</title>",
                f"<style>{STYLE}</style><h1>wanbench report</h1>",
                "<h2>Runs</h2>", table_html(runs.manifests[MANIFEST_COLUMNS])]
    sections.append("<h2>Every run</h2>")
    for scenario in dict.fromkeys(runs.manifests["scenario_name"]):
        sections.append(f"<h3 id='{html.escape(scenario)}'>{html.escape(scenario)}</h3>"
                        f"<h4>points: medians over valid repetitions</h4>"
                        + table_html(point_table(scenario, runs)))
        sections += [_figure_section(r, figure_dir) for r in results
                     if r.spec.paper == GENERIC and r.spec.scenario == scenario]
    for paper, name in PAPERS.items():
        mine = [r for r in results if r.spec.paper == paper]
        if mine:
            sections.append(f"<h2>{html.escape(name)}</h2>")
            sections += [_figure_section(r, figure_dir) for r in mine]
    path = out_dir / "index.html"
    path.write_text("\n".join(sections))
    return path


def overlaid_figures(runs: RunSet, out_dir: Path, figure_dir: str = "figures") -> str:
    """The applicable figures of several runs of one scenario (a base and its candidates:
    each run, by kernel, a series of its own), drawn under out_dir/figure_dir, as HTML
    sections for a page that sits in out_dir (wanbench compare's)."""
    results = [prepare(spec, runs) for spec in applicable(runs)]
    for result in results:
        if isinstance(result, FigureData):
            render(result, out_dir / figure_dir)
    sections = [_figure_section(r, figure_dir) for r in results]
    return "<h2>Figures: every run overlaid</h2>\n" + "\n".join(sections) + "\n"


def _render(job: tuple[FigureData, Path, tuple[str, ...]]) -> list[Path]:
    return render(*job)


def applicable(runs: RunSet, generic: bool = True) -> tuple[FigureSpec, ...]:
    """The figures for `runs`: each one's generic figures (unless not `generic`), and the
    paper figures whose scenario is among them."""
    scenarios = set(runs.manifests["scenario_name"])
    papers = tuple(s for s in SPECS if s.scenario in scenarios)
    return (generic_specs(runs) if generic else ()) + papers


def plot_all(runs: RunSet, out_dir: Path, specs: tuple[FigureSpec, ...] | None = None,
             jobs: int = 1) -> list[FigureData | Skipped]:
    """Render `specs` (default: every applicable one) into out_dir/figures, write
    out_dir/index.html.

    Preparing is cheap; drawing is matplotlib-bound, so with jobs > 1 each figure's PNG and
    SVG are drawn in separate processes (one large figure then also uses two CPUs).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    results = [prepare(spec, runs) for spec in (applicable(runs) if specs is None else specs)]
    figures = [r for r in results if isinstance(r, FigureData)]
    if jobs > 1:
        todo = [(r, out_dir / "figures", (fmt,)) for r in figures for fmt in FORMATS]
    else:
        todo = [(r, out_dir / "figures", FORMATS) for r in figures]
    if jobs > 1 and len(todo) > 1:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(min(jobs, len(todo)), mp_context=context) as pool:
            list(pool.map(_render, todo))
    else:
        for job in todo:
            _render(job)
    write_report(runs, results, out_dir)
    return results
