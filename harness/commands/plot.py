"""`wanbench plot RUN [RUN ...] [--out DIR]`: every figure spec, then an index.html report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from clients.paths import cache_dir
from harness.analysis.cache import Cache
from harness.analysis.generic import export_hgrm
from harness.analysis.plots import DEFAULT_FORMATS, FORMATS, LOOKS, panels, render
from harness.analysis.prepare import Skipped, labelled
from harness.analysis.report import applicable, plot_all
from harness.results.format import ResultsFormatError
from harness.results.runset import RunSet, find_runs, read_runs
from harness.scenario import recorded


def _runs_with_points(given: list[str]) -> list[Path]:
    """The run directories given, a folder's expanded; a folder's run without a finished
    point (interrupted before its first) is skipped with a line saying so, not the folder."""
    dirs: list[Path] = []
    for path in map(Path, given):
        found = find_runs(path)
        if found in ([], [path]):  # a run named on its own: read_runs says what is wrong
            dirs.append(path)
            continue
        for run in found:
            if (run / "points.parquet").is_file() or any((run / "points").glob("*.json")):
                dirs.append(run)
            else:
                print(f"skipped {run}: no finished point (interrupted before its first; "
                      f"wanbench run --resume {run} measures them)")
    return dirs


def handle(args: argparse.Namespace) -> int:
    try:
        runs = read_runs(_runs_with_points(args.runs), recorded)
        if args.label:
            runs = labelled(runs, _labels(runs, args.label))
    except (ResultsFormatError, ValueError) as exc:
        print(f"wanbench plot: {exc}", file=sys.stderr)
        return 2
    out_dir = args.out or (Path(args.runs[0]) if len(args.runs) == 1 else None)
    if out_dir is None:
        print("wanbench plot: several runs given: say where the report goes with --out DIR",
              file=sys.stderr)
        return 2
    specs = applicable(runs, generic=args.figures == "all")
    results = plot_all(runs, Path(out_dir), specs, jobs=args.jobs,
                       cache=Cache(read=not args.no_cache), formats=args.format,
                       look=args.style)
    for result in results:
        if isinstance(result, Skipped):
            print(f"skipped {result.spec.id}: {result.reason}")
        else:
            print(f"wrote {result.spec.id}")
    if args.panel_files:
        panel_dir = Path(out_dir) / "panels"
        drawn = [render(panel, panel_dir, args.format, args.style) for result in results
                 if not isinstance(result, Skipped) for panel in panels(result)]
        print(f"wrote {len(drawn)} panels, one per file, under {panel_dir}")
    if args.hgrm:
        hgrm_dir = Path(out_dir) / "hgrm"
        print(f"wrote {len(export_hgrm(runs, hgrm_dir))} .hgrm files under {hgrm_dir}")
    print(f"report: {Path(out_dir) / 'index.html'}")
    return 0


def _labels(runs: RunSet, names: list[str]) -> dict[str, str]:
    """run id -> its --label, in the order the runs were given (read_runs keeps it)."""
    ids = list(runs.manifests["run_id"])
    if len(names) != len(ids):
        raise ValueError(f"{len(names)} --label for {len(ids)} run(s); give one per run, in "
                         "the order the runs are given")
    return dict(zip(ids, names, strict=True))


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of processes, 1 or more")
    return int(text)


def _formats(text: str) -> tuple[str, ...]:
    """'svg,pdf' -> ('png', 'svg', 'pdf'): the report always shows the PNG."""
    asked = [fmt.strip().lower() for fmt in text.split(",") if fmt.strip()]
    unknown = [fmt for fmt in asked if fmt not in FORMATS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown format {', '.join(unknown)}: choose from {', '.join(FORMATS)}")
    return tuple(dict.fromkeys(["png", *asked]))


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plot",
        help="figures and an HTML report from run directories",
        description="Draw each run's headline metrics (reply rate, server CPU, response-time "
        "percentiles, errors, cycles per packet where measured) against each numeric sweep "
        "axis, the reproduction figures of the papers' scenarios among the runs, and an "
        "index.html with a table of every point. A RUN may also be a folder of run "
        "directories (e.g. results/).",
    )
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run directory")
    parser.add_argument("--out", type=Path, help="output directory (default: the single RUN)")
    parser.add_argument("--jobs", type=_positive, default=None,
                        help="processes preparing and drawing figures (default: one per CPU "
                             "this process may use)")
    parser.add_argument("--figures", choices=("all", "papers"), default="all",
                        help="papers: only the papers' reproduction figures (make reproduce "
                             "keeps results/reference to those)")
    parser.add_argument("--style", choices=tuple(LOOKS), default="screen",
                        help="paper: single-column width (3.4 in for one panel), serif fonts "
                             "at caption size; screen (default): larger, for the HTML report")
    parser.add_argument("--format", type=_formats, default=DEFAULT_FORMATS, metavar="FMT[,FMT]",
                        help="files per figure besides the PNG the report shows: "
                             f"{', '.join(FORMATS[1:])} (default: {', '.join(DEFAULT_FORMATS)}; "
                             "pdf, vector, for a paper)")
    parser.add_argument("--label", action="append", default=[], metavar="NAME",
                        help="name the runs' series in the figures, one --label per run in "
                             "the order given (default: by kernel where the kernels differ, "
                             "else by run id)")
    parser.add_argument("--panel-files", action="store_true",
                        help="also draw each panel of each figure as a figure of its own, "
                             "under OUT/panels/ (FIGURE--METRIC[--FACET].FMT): one panel fits "
                             "a paper's single column (--style paper), a grid does not")
    parser.add_argument("--hgrm", action="store_true",
                        help="also write each point's response-time percentile distribution "
                             "(corrected and uncorrected) as HdrHistogram .hgrm files under "
                             "OUT/hgrm/, for HdrHistogram's plotter and wrk2 users' tools")
    parser.add_argument("--no-cache", action="store_true",
                        help="prepare and draw every figure afresh rather than take what the "
                             f"cache ({cache_dir()}) holds for these runs and this code; the "
                             "cache is refreshed")
    parser.set_defaults(func=handle)
