"""`wanbench compare BASE CAND [CAND ...]` or `wanbench compare BASE... -- CAND... [-- CAND...]`:
arguments, exit codes, printing."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from harness.analysis.compare import engine, render, samples
from harness.analysis.compare.metrics import DEFAULT_METRICS, METRICS
from harness.analysis.compare.noise import NoiseError
from harness.analysis.compare.report import Refused, build_report
from harness.commands import error_text
from harness.results.format import ResultsFormatError
from harness.results.runset import read_runs
from harness.scenario import recorded

SIDE_SEPARATOR = "--"
# argparse drops a '--' (the end of options); here it separates sides, so it is swapped for a
# token no path can hold (a NUL) before argparse sees it.
_SIDE_MARK = "\0"

USAGE_SIDES = """\
sides:
  BASE CAND [CAND ...]            one run (or a folder of runs) per side, each CAND against BASE
  BASE... -- CAND... [-- CAND...] several runs per side: the run is the unit, so 3 runs per side
                                  decide what one run per side cannot
"""
EXIT_HELP = """\
exit status:
  0  no regression: every row is unchanged (~) or improved, and each `~` would have
     caught a regression of --detect
  1  at least one regression (q < --alpha and |change| >= --min-effect, worse direction);
     never with one run per side unless a noise record knows what a second run moves
  2  bad input or any error: missing or unreadable run, not a run directory, different
     scenarios or experiments (see --force), no common points, bad --format, --metric or
     --noise
  3  inconclusive: no regression found, but some row could not have detected one of
     --detect (one run per side without a noise record, too few runs), or a point has no
     valid repetition on a side; the report says how many runs per side would decide it
"""


def _per_metric(zero_allowed: bool) -> Callable[[str], tuple[str | None, float]]:
    """'0.05' or 'resp_time_p99_ms=0.5' (CPU metrics: percentage points, 'cpu_server_pct=2')."""
    def parse(text: str) -> tuple[str | None, float]:
        name, _, value = text.rpartition("=")
        if name and name not in METRICS:
            raise argparse.ArgumentTypeError(f"{name!r}: not a metric compare knows; use one "
                                             f"of {', '.join(METRICS)}")
        try:
            size = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r}: not a number; give e.g. 0.05"
                                             ) from None
        if not (size >= 0 if zero_allowed else size > 0):
            raise argparse.ArgumentTypeError(
                f"{value}: give a {'non-negative' if zero_allowed else 'positive'} size, "
                "e.g. 0.05")
        return (name or None), size
    return parse


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a number; give a fraction such "
                                         "as 0.05") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text}: give a fraction in (0, 1), e.g. 0.05")
    return value


def _one_line_error(message: str) -> NoReturn:
    print(f"wanbench compare: {message}; see `wanbench compare --help`", file=sys.stderr)
    raise SystemExit(2)


def sides(runs: list[str]) -> tuple[list[Path], list[list[Path]]]:
    """The base side and each candidate side from the positional arguments."""
    if _SIDE_MARK not in runs:
        if len(runs) < 2:
            _one_line_error("give a base and at least one candidate: BASE CAND [CAND ...]")
        return [Path(runs[0])], [[Path(run)] for run in runs[1:]]
    groups: list[list[Path]] = [[]]
    for run in runs:
        if run == _SIDE_MARK:
            groups.append([])
        else:
            groups[-1].append(Path(run))
    if any(not group for group in groups):
        _one_line_error(f"a side with no run around {SIDE_SEPARATOR!r}: give BASE... "
                        f"{SIDE_SEPARATOR} CAND... (each side one or more runs)")
    return groups[0], groups[1:]


def handle(args: argparse.Namespace) -> int:
    base, candidates = sides(args.runs)
    detect, min_effect = dict(args.detect or []), dict(args.min_effect or [])
    options = engine.Options(
        metrics=tuple(args.metric) if args.metric else None, alpha=args.alpha,
        min_effect=min_effect.pop(None, 0.02), detect=detect.pop(None, 0.05),
        level=args.level, detect_for=tuple(sorted(detect.items())),
        min_effect_for=tuple(sorted(min_effect.items())), allow_invalid=args.allow_invalid)
    try:
        report = build_report(base, candidates, options, force=args.force,
                              noise_path=args.noise)
        text = render.FORMATS[args.format](report)
        if args.out and args.format == "html":
            # matplotlib (half a second to import) only for a page that draws
            from harness.analysis.report import overlaid_figures

            # the page shows the runs themselves too, each kernel (or run) a series of its own
            runs = read_runs([*base, *(path for side in candidates for path in side)],
                             recorded)
            text += overlaid_figures(runs, args.out.parent)
        if args.out:
            args.out.write_text(text)
    except (ResultsFormatError, samples.NotARun, engine.Incomparable, Refused, NoiseError,
            OSError) as exc:
        print(f"wanbench compare: {error_text(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - exit 1 means "regression": never for a crash
        print(f"wanbench compare: internal error ({type(exc).__name__}: {exc}); no verdict; "
              "please report it with the run directories", file=sys.stderr)
        return 2
    if args.out:
        print(f"verdict: {report.verdict} (exit {report.exit_code}); written to {args.out}")
    else:
        sys.stdout.write(text)
    for candidate in report.candidates:
        if candidate.forced:
            print("wanbench compare: WARNING: --force: compared a different experiment: "
                  + "; ".join(candidate.differences.refused), file=sys.stderr)
    # the same warning about each of several candidates (estimated cycles): said once
    for warning in dict.fromkeys(w for c in report.candidates for w in c.comparison.warnings):
        print(f"wanbench compare: warning: {warning}", file=sys.stderr)
    return report.exit_code


def _keep_side_separators(parse: Callable) -> Callable:
    def parse_known_args(args: list[str] | None = None, namespace=None):  # noqa: ANN001
        args = sys.argv[1:] if args is None else args
        return parse([_SIDE_MARK if a == SIDE_SEPARATOR else a for a in args], namespace)
    return parse_known_args


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare",
        help="base vs candidate run(s): change, interval, verdict; exit 1 on regression",
        usage="wanbench compare [options] BASE CAND [CAND ...]\n"
              "       wanbench compare [options] BASE... -- CAND... [-- CAND...]",
        description=(
            "Compare one or more candidate sides with a base side of the same scenario, point "
            "by point. The run is the unit: a side is one run, several runs, or a folder of "
            "runs of one kernel; with one run per side, what a second run moves comes from a "
            "noise record of A/A runs (`wanbench noise`), without which the verdict is "
            "inconclusive. Each row: the change with its confidence interval, significance "
            "after Benjamini-Hochberg over the grid, and whether the data could have detected "
            "a regression at all (docs/compare.md). Refuses (exit 2) runs that differ in "
            "anything but the kernel and the machine's state, unless --force."),
        epilog=USAGE_SIDES + EXIT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("runs", nargs="+", metavar="RUN",
                        help="run directories or folders of runs; see `sides` below")
    parser.add_argument("--metric", action="append", choices=list(METRICS), metavar="METRIC",
                        help=f"metric column (repeatable; default: {', '.join(DEFAULT_METRICS)}"
                        f" where both sides measured it; any of: {', '.join(METRICS)})")
    parser.add_argument("--noise", type=Path, metavar="FILE",
                        help="noise record of A/A runs of this scenario on this machine "
                        "(`wanbench noise`); default: noise.json beside the base run(s), "
                        "used when it describes them")
    parser.add_argument("--allow-invalid", action="store_true",
                        help="judge invalid repetitions too (every row shows them either way, "
                        "with their reasons)")
    parser.add_argument("--alpha", type=_fraction, default=0.05,
                        help="false discovery rate over the grid (default 0.05)")
    parser.add_argument("--min-effect", type=_per_metric(True), action="append",
                        metavar="[METRIC=]SIZE",
                        help="smaller changes are never a regression, however significant "
                        "(default 0.02 = 2 %%; CPU percentages 1 point; repeatable per metric, "
                        "e.g. --min-effect cpu_server_pct=2 for 2 points)")
    parser.add_argument("--detect", type=_per_metric(False), action="append",
                        metavar="[METRIC=]SIZE",
                        help="`~` promises a regression this large would have been detected; "
                        "rows that could not are inconclusive (default 0.05 = 5 %%; CPU "
                        "percentages 2.5 points; repeatable per metric, e.g. --detect "
                        "resp_time_p99_ms=1 for a doubling; a drop of a higher-is-better "
                        "metric must stay below 1)")
    parser.add_argument("--level", type=_fraction, default=0.95,
                        help="confidence level of the change's interval (default 0.95)")
    parser.add_argument("--format", choices=tuple(render.FORMATS), default="markdown",
                        help="report format (default markdown)")
    parser.add_argument("--out", type=Path, help="write the report here instead of stdout")
    parser.add_argument("--force", action="store_true",
                        help="compare runs of different experiments (scenario fields, tools, "
                        "CPU) anyway, with a loud warning")
    parser.error = _one_line_error  # type: ignore[method-assign]
    parser.parse_known_args = _keep_side_separators(  # type: ignore[method-assign]
        parser.parse_known_args)
    parser.set_defaults(func=handle)
