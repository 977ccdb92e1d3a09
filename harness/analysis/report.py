"""Every figure of some runs, and index.html: each figure (or why it was skipped), its table,
and a summary of the manifests."""

from __future__ import annotations

import html
import multiprocessing
import os
import tempfile
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis import derive
from harness.analysis.cache import Cache, identity, scenario_key
from harness.analysis.figures import PAPERS, SPECS, FigureSpec
from harness.analysis.generic import GENERIC, generic_specs, point_table
from harness.analysis.numbers import human
from harness.analysis.plots import render
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
                 figure_dir: str = "figures",
                 point_tables: dict[str, pd.DataFrame] | None = None) -> Path:
    """Write out_dir/index.html referring to figures under out_dir/figure_dir (point_tables:
    each scenario's, where already made)."""
    sections = ["<!doctype html><meta charset='utf-8'><title>wanbench report</title>",
                f"<style>{STYLE}</style><h1>wanbench report</h1>",
                "<h2>Runs</h2>", table_html(runs.manifests[MANIFEST_COLUMNS])]
    sections.append("<h2>Every run</h2>")
    for scenario in dict.fromkeys(runs.manifests["scenario_name"]):
        table = (point_tables or {}).get(scenario)
        sections.append(f"<h3 id='{html.escape(scenario)}'>{html.escape(scenario)}</h3>"
                        f"<h4>points: medians over valid repetitions</h4>"
                        + table_html(point_table(scenario, runs) if table is None else table))
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


def applicable(runs: RunSet, generic: bool = True) -> tuple[FigureSpec, ...]:
    """The figures for `runs`: each one's generic figures (unless not `generic`), and the
    paper figures whose scenario is among them."""
    scenarios = set(runs.manifests["scenario_name"])
    papers = tuple(s for s in SPECS if s.scenario in scenarios)
    return (generic_specs(runs) if generic else ()) + papers


def default_jobs() -> int:
    """Drawing processes by default: one per CPU this process may run on."""
    return len(os.sched_getaffinity(0))


def _figure(runs: RunSet, cache: Cache, figure_dir: Path, spec: FigureSpec, key: str | None,
            cached: FigureData | Skipped | None) -> FigureData | Skipped:
    """One figure: prepared (unless cached), and drawn unless figure_dir holds its files as
    drawn for `key`. Drawn into a private folder and moved into place, so that a concurrent
    plot into the same folder never leaves a file of its own taken for ours."""
    result = cached if cached is not None else prepare(spec, runs)
    if cached is None:
        cache.store(key, result)
    if isinstance(result, FigureData) and not cache.drawn(key, figure_dir, spec.id):
        figure_dir.mkdir(parents=True, exist_ok=True)
        drawn = {}
        with tempfile.TemporaryDirectory(dir=figure_dir, prefix=".drawing-") as private:
            for path in render(result, Path(private)):
                drawn[path.name] = identity(path)
                os.replace(path, figure_dir / path.name)
        cache.record_drawn(key, figure_dir, spec.id, drawn)
    return result


def _point_table(runs: RunSet, cache: Cache, scenario: str, key: str | None) -> pd.DataFrame:
    table = point_table(scenario, runs)
    cache.store(key, table)
    return table


# What worker processes work on: inherited when they are forked, never pickled.
_INHERITED: tuple[RunSet, Cache] | None = None


def _inherit(runs: RunSet, cache: Cache) -> None:
    global _INHERITED
    _INHERITED = (runs, cache)


def _in_worker(task: Callable[..., Any], *args: Any) -> Any:
    assert _INHERITED is not None, "a worker's runs are set by its pool's initializer"
    return task(*_INHERITED, *args)


def _cost(spec: FigureSpec, runs: RunSet) -> int:
    """A figure's work, roughly, to start the longest first: its panels' points."""
    mine = runs.scenario(spec.scenario)
    rows = len(mine.histograms) if spec.source == "latency" else len(mine.points)
    return len(spec.y) * rows


def plot_all(runs: RunSet, out_dir: Path, specs: tuple[FigureSpec, ...] | None = None,
             jobs: int | None = None, cache: Cache | None = None) -> list[FigureData | Skipped]:
    """Render `specs` (default: every applicable one) into out_dir/figures, write
    out_dir/index.html.

    Each figure is prepared and drawn in one of `jobs` worker processes (default: one per
    CPU), the longest first, while the point tables are made beside them; what the cache
    holds for these runs and this code is taken from it, and figures whose files are as drawn
    for it are not drawn again.
    """
    cache = cache or Cache()
    jobs = jobs or default_jobs()
    specs = applicable(runs) if specs is None else specs
    figure_dir = out_dir / "figures"
    out_dir.mkdir(parents=True, exist_ok=True)
    keys = {spec.id: scenario_key(runs, spec.scenario, repr(spec)) for spec in specs}
    results: dict[str, FigureData | Skipped | None] = {
        spec.id: cache.load(keys[spec.id]) for spec in specs}
    scenarios = list(dict.fromkeys(runs.manifests["scenario_name"]))
    table_keys = {s: scenario_key(runs, s, "point_table") for s in scenarios}
    tables: dict[str, pd.DataFrame | None] = {s: cache.load(table_keys[s]) for s in scenarios}
    figures = sorted((spec for spec in specs if results[spec.id] is None or (
        isinstance(results[spec.id], FigureData)
        and not cache.drawn(keys[spec.id], figure_dir, spec.id))),
        key=lambda spec: -_cost(spec, runs))
    missing_tables = [s for s in scenarios if tables[s] is None]
    tasks: list[tuple[Callable[..., Any], tuple[Any, ...]]] = [
        *((_figure, (figure_dir, spec, keys[spec.id], results[spec.id])) for spec in figures),
        *((_point_table, (s, table_keys[s])) for s in missing_tables)]
    for scenario in {spec.scenario for spec in figures} | set(missing_tables):
        derive.derived_points(runs.scenario(scenario))  # once, inherited by every worker
    if jobs > 1 and len(tasks) > 1:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(min(jobs, len(tasks)), mp_context=context,
                                 initializer=_inherit, initargs=(runs, cache)) as pool:
            futures = [pool.submit(_in_worker, task, *args) for task, args in tasks]
            try:
                done = [future.result() for future in futures]
            except BaseException:  # a stop signal (the workers got it too), a failed figure
                pool.shutdown(cancel_futures=True)  # not every figure still queued
                raise
    else:
        done = [task(runs, cache, *args) for task, args in tasks]
    results.update({spec.id: result for spec, result in zip(figures, done, strict=False)})
    tables.update(zip(missing_tables, done[len(figures):], strict=True))
    final = [results[spec.id] for spec in specs]
    write_report(runs, final, out_dir, point_tables=tables)
    return final
