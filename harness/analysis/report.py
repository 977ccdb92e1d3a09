"""Every figure of some runs, and index.html: each figure (or why it was skipped), its table,
and a summary of the manifests."""

from __future__ import annotations

import hashlib
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from harness.analysis.figures import LABELS, PAPERS, SPECS, FigureSpec, label, readable
from harness.analysis.generic import GENERIC, generic_specs, point_table
from harness.analysis.numbers import human
from harness.analysis.plots import FORMATS, render
from harness.analysis.prepare import FigureData, Skipped, prepare
from harness.results.runset import RunSet

MANIFEST_COLUMNS = [
    "scenario_name", "run_id", "kernel_release", "created_at", "repetitions", "cpu_model",
    "cpu_count", "topology_backend", "hardware_counters", "git_revision",
]
TEMPLATES = Environment(loader=FileSystemLoader(Path(__file__).with_name("templates")),
                        autoescape=select_autoescape(["j2"]), trim_blocks=True)
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
                    formats: tuple[str, ...] = FORMATS) -> str:
    skipped = result.reason if isinstance(result, Skipped) else None
    return TEMPLATES.get_template("figure.html.j2").render(
        spec=result.spec, figure_dir=figure_dir, skipped=skipped, formats=formats,
        notes=[] if skipped else result.notes,
        tables=[] if skipped else _tables(result))


def write_report(runs: RunSet, results: list[FigureData | Skipped], out_dir: Path,
                 figure_dir: str = "figures", formats: tuple[str, ...] = FORMATS) -> Path:
    """Write out_dir/index.html referring to figures under out_dir/figure_dir."""
    scenarios = [
        {"name": scenario, "table": Markup(table_html(point_table(scenario, runs))),
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


def _render(job: tuple[FigureData, Path, tuple[str, ...], str]) -> list[Path]:
    return render(*job)


def applicable(runs: RunSet, generic: bool = True) -> tuple[FigureSpec, ...]:
    """The figures for `runs`: each one's generic figures (unless not `generic`), and the
    paper figures whose scenario is among them."""
    scenarios = set(runs.manifests["scenario_name"])
    papers = tuple(s for s in SPECS if s.scenario in scenarios)
    return (generic_specs(runs) if generic else ()) + papers


def plot_all(runs: RunSet, out_dir: Path, specs: tuple[FigureSpec, ...] | None = None,
             jobs: int = 1, formats: tuple[str, ...] = FORMATS,
             look: str = "screen") -> list[FigureData | Skipped]:
    """Render `specs` (default: every applicable one) into out_dir/figures in `formats` (PNG
    first: the report shows it) and `look` (plots.LOOKS), write out_dir/index.html.

    Preparing is cheap; drawing is matplotlib-bound, so with jobs > 1 each figure's PNG and
    SVG are drawn in separate processes (one large figure then also uses two CPUs).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    results = [prepare(spec, runs) for spec in (applicable(runs) if specs is None else specs)]
    figures = [r for r in results if isinstance(r, FigureData)]
    if jobs > 1:
        todo = [(r, out_dir / "figures", (fmt,), look) for r in figures for fmt in formats]
    else:
        todo = [(r, out_dir / "figures", formats, look) for r in figures]
    if jobs > 1 and len(todo) > 1:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(min(jobs, len(todo)), mp_context=context) as pool:
            list(pool.map(_render, todo))
    else:
        for job in todo:
            _render(job)
    write_report(runs, results, out_dir, formats=formats)
    return results
