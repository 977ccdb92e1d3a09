"""`wanbench plot RUN [RUN ...] [--out DIR]`: every figure spec, then an index.html report."""

from __future__ import annotations

import argparse
import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from harness.analysis.figures import SPECS, FigureSpec
from harness.analysis.load import ResultsFormatError, RunSet, load_runs
from harness.analysis.plots import FORMATS, render
from harness.analysis.prepare import FigureData, Skipped, prepare
from harness.analysis.report import write_report


def _render(job: tuple[FigureData, Path, tuple[str, ...]]) -> list[Path]:
    return render(*job)


def plot_all(runs: RunSet, out_dir: Path, specs: tuple[FigureSpec, ...] = SPECS,
             jobs: int = 1) -> list[FigureData | Skipped]:
    """Render every spec with data into out_dir/figures and write out_dir/index.html.

    Preparing is cheap; drawing is matplotlib-bound, so with jobs > 1 each figure's PNG and
    SVG are drawn in separate processes (one large figure then also uses two CPUs).
    """
    results = [prepare(spec, runs) for spec in specs]
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


def _handle(args: argparse.Namespace) -> int:
    try:
        runs = load_runs(args.runs)
    except ResultsFormatError as exc:
        print(f"wanbench plot: {exc}", file=sys.stderr)
        return 2
    out_dir = args.out or (Path(args.runs[0]) if len(args.runs) == 1 else None)
    if out_dir is None:
        print("wanbench plot: several runs given: say where the report goes with --out DIR",
              file=sys.stderr)
        return 2
    results = plot_all(runs, Path(out_dir), jobs=args.jobs)
    for result in results:
        if isinstance(result, Skipped):
            print(f"skipped {result.spec.id}: {result.reason}")
        else:
            print(f"wrote {result.spec.id}")
    print(f"report: {Path(out_dir) / 'index.html'}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plot",
        help="figures and an HTML report from run directories",
        description="Draw every reproduction figure whose scenario is among the given runs. "
        "A RUN may also be a folder of run directories (e.g. results/).",
    )
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run directory")
    parser.add_argument("--out", type=Path, help="output directory (default: the single RUN)")
    # Default 1: on a shared, busy machine two drawing processes measured slower
    # (docs/bench-analysis.md); on an idle one --jobs 2 helps.
    parser.add_argument("--jobs", type=int, default=1,
                        help="processes drawing figures (default 1)")
    parser.set_defaults(func=_handle)
