"""`wanbench plot RUN [RUN ...] [--out DIR]`: every figure spec, then an index.html report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.analysis.figures import SPECS, FigureSpec
from harness.analysis.load import ResultsFormatError, RunSet, load_runs
from harness.analysis.plots import render
from harness.analysis.prepare import FigureData, Skipped, prepare
from harness.analysis.report import write_report


def plot_all(runs: RunSet, out_dir: Path,
             specs: tuple[FigureSpec, ...] = SPECS) -> list[FigureData | Skipped]:
    """Render every spec with data into out_dir/figures and write out_dir/index.html."""
    results = [prepare(spec, runs) for spec in specs]
    for result in results:
        if isinstance(result, FigureData):
            render(result, out_dir / "figures")
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
    results = plot_all(runs, Path(out_dir))
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
    parser.set_defaults(func=_handle)
