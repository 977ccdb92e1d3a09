"""Every figure of some runs, and index.html: each figure (or why it was skipped), its table,
and a summary of the manifests."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import tempfile
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from markupsafe import Markup

from harness.analysis import derive
from harness.analysis.cache import Cache, identity, scenario_key
from harness.analysis.figures import LABELS, PAPERS, SPECS, FigureSpec, label, readable
from harness.analysis.generic import GENERIC, generic_specs, point_table
from harness.analysis.html_pages import TEMPLATES
from harness.analysis.numbers import human
from harness.analysis.plots import DEFAULT_FORMATS, render
from harness.analysis.prepare import FigureData, Skipped, prepare
from harness.results.runset import RunSet

MANIFEST_COLUMNS = [
    "scenario_name", "run_id", "kernel_release", "created_at", "repetitions", "cpu_model",
    "cpu_count", "topology_backend", "hardware_counters", "git_revision",
]
# Table columns that are no axis of a figure (figures.LABELS names those), as a reader says them
COLUMN_NAMES = {
    "scenario_name": "scenario", "run_id": "run", "kernel_release": "kernel",
    "created_at": "started", "cpu_model": "CPU", "cpu_count": "CPUs",
    "topology_backend": "topology", "hardware_counters": "hardware counters",
    "git_revision": "revision", "x_intercept": "x at idle = 0", "r": "r", "n": "n",
    "knee_offered_rps": "knee [offered req/s]", "saturated": "server saturated",
    "valid": "valid", "read_off": "read off a plot",
}
# Columns whose cells are prepare.py labels ("dispatch=epoll, cold_conns=750")
LABEL_COLUMNS = ("facet", "series")
# Columns of words, which wrap rather than widen the page
TEXT_COLUMNS = ("note", "source", "symbol", "cpu_model")


def _column_name(column: object) -> str:
    name = str(column)
    if name in COLUMN_NAMES:
        return COLUMN_NAMES[name]
    return label(name) if name in LABELS else readable(name).replace("_", " ")


def _cell(value: object) -> str:
    """One number format for people (numbers.human); yes/no, never True/False."""
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, int | np.integer):
        return f"{value:,}"
    if isinstance(value, float | np.floating):
        return human(float(value))
    return "—" if value is None or value is pd.NA else str(value)


def _validity_class(value: object) -> str:
    """Validity and verdicts in colour: all valid (PASS) green, none (FAIL) red, some orange."""
    if isinstance(value, bool | np.bool_):
        return "good" if value else "bad"
    text = str(value)
    if text in ("PASS", "FAIL"):
        return "good" if text == "PASS" else "bad"
    valid, sep, total = text.partition("/")
    if sep and valid.isdigit() and total.isdigit():
        return "good" if valid == total else "bad" if valid == "0" else "partly"
    return ""


def _classes(frame: pd.DataFrame) -> pd.DataFrame:
    classes = pd.DataFrame("", index=frame.index, columns=frame.columns)
    for column in frame.columns:
        if column in ("valid", "verdict"):
            classes[column] = frame[column].map(_validity_class)
        elif column in TEXT_COLUMNS:
            classes[column] = "text"
    return classes


def table_html(frame: pd.DataFrame) -> str:
    """A table for people: readable column names, numbers.human in every number cell,
    labels as legends show them, validity in colour; its cells' ids unique on the page."""
    frame = frame.reset_index(drop=True)
    for column in LABEL_COLUMNS:
        if column in frame.columns:
            frame[column] = frame[column].map(lambda v: readable(v) if isinstance(v, str) else v)
    digest = hashlib.sha1(frame.to_csv().encode()).hexdigest()[:8]
    styler = (frame.style.hide(axis="index").set_uuid(digest).format(_cell)
              .set_td_classes(_classes(frame))
              .format_index(_column_name, axis="columns"))
    return f"<div class='table'>{styler.to_html()}</div>"


PAPER_TABLE_COLUMNS = ["facet", "series", "metric", "x", "value", "scale", "source", "how",
                       "note"]


def paper_table(paper: pd.DataFrame) -> pd.DataFrame:
    """The paper's values of one figure as the report lists them: where each comes from and
    whether it was printed or read off a plot."""
    how = paper["read_off"].map({True: "read off a plot", False: "printed"})
    return paper.assign(how=how)[PAPER_TABLE_COLUMNS]


def _tables(result: FigureData) -> list[tuple[str, Markup]]:
    """Our table and the paper's values, side by side."""
    tables = []
    if result.table is not None:
        tables.append(("ours", Markup(table_html(result.table))))
    if not result.paper.empty:
        tables.append(("paper's values", Markup(table_html(paper_table(result.paper)))))
    return tables


def _figure_section(result: FigureData | Skipped, figure_dir: str,
                    formats: tuple[str, ...] = DEFAULT_FORMATS) -> str:
    skipped = result.reason if isinstance(result, Skipped) else None
    return TEMPLATES.get_template("figure.html.j2").render(
        spec=result.spec, figure_dir=figure_dir, skipped=skipped, formats=formats,
        notes=[] if skipped else result.notes,
        tables=[] if skipped else _tables(result))


def write_report(runs: RunSet, results: list[FigureData | Skipped], out_dir: Path,
                 figure_dir: str = "figures", formats: tuple[str, ...] = DEFAULT_FORMATS,
                 point_tables: dict[str, pd.DataFrame] | None = None) -> Path:
    """Write out_dir/index.html referring to figures under out_dir/figure_dir (point_tables:
    each scenario's, where already made)."""
    tables = point_tables or {}
    scenarios = [
        {"name": scenario,
         "table": Markup(table_html(point_table(scenario, runs) if tables.get(scenario) is None
                                    else tables[scenario])),
         "figures": [Markup(_figure_section(r, figure_dir, formats)) for r in results
                     if r.spec.paper == GENERIC and r.spec.scenario == scenario]}
        for scenario in dict.fromkeys(runs.manifests["scenario_name"])
    ]
    papers = [
        {"name": name,
         "figures": [Markup(_figure_section(r, figure_dir, formats)) for r in mine]}
        for paper, name in PAPERS.items()
        if (mine := [r for r in results if r.spec.paper == paper])
    ]
    manifests = runs.manifests[MANIFEST_COLUMNS]
    # a revision's first 12 hex digits name it, as git log --oneline does, and fit the page
    manifests = manifests.assign(git_revision=manifests["git_revision"].astype(str).str[:12])
    page = TEMPLATES.get_template("report.html.j2").render(
        runs_table=Markup(table_html(manifests)),
        scenarios=scenarios, papers=papers)
    path = out_dir / "index.html"
    path.write_text(page)
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
            cached: FigureData | Skipped | None, formats: tuple[str, ...],
            look: str) -> FigureData | Skipped:
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
            for path in render(result, Path(private), formats, look):
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
             jobs: int | None = None, cache: Cache | None = None,
             formats: tuple[str, ...] = DEFAULT_FORMATS,
             look: str = "screen") -> list[FigureData | Skipped]:
    """Render `specs` (default: every applicable one) into out_dir/figures in `formats` (PNG
    first: the report shows it) and `look` (plots.LOOKS), write out_dir/index.html.

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
    # what is drawn depends on the formats and the look too: a figure drawn otherwise is redrawn
    keys = {spec.id: scenario_key(runs, spec.scenario, repr((spec, formats, look)))
            for spec in specs}
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
        *((_figure, (figure_dir, spec, keys[spec.id], results[spec.id], formats, look))
          for spec in figures),
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
    write_report(runs, final, out_dir, formats=formats, point_tables=tables)
    return final
