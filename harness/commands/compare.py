"""`wanbench compare BASE_RUN CAND_RUN [CAND_RUN ...]`: arguments, exit codes, printing."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from harness.analysis.compare import engine, render, samples
from harness.analysis.compare.metrics import DEFAULT_METRICS, METRICS
from harness.analysis.compare.report import Refused, build_report
from harness.analysis.report import overlaid_figures
from harness.results.format import ResultsFormatError
from harness.results.runset import read_runs

EXIT_HELP = """\
exit status:
  0  no regression: every row is unchanged (~) or improved, and each `~` would have
     caught a regression of --detect
  1  at least one regression (q < --alpha and |change| >= --min-effect, worse direction)
  2  bad input or any error: missing or unreadable run, not a run directory, different
     scenarios or experiments (see --force), no common points, bad --format or --metric
  3  inconclusive: no regression found, but some row could not have detected one of
     --detect (too few repetitions or too short a window); the report says how many
     repetitions (or how long a window) would make it conclusive
"""


def _fraction(low_open: bool) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: not a number; give a fraction such "
                                             "as 0.05") from None
        if not ((0 < value if low_open else 0 <= value) and value < 1):
            raise argparse.ArgumentTypeError(
                f"{text}: give a fraction in {'(0' if low_open else '[0'}, 1), e.g. 0.05")
        return value
    return parse


def _detect(text: str) -> tuple[str | None, float]:
    """'0.05' or 'resp_time_p99_ms=0.5'."""
    name, _, value = text.rpartition("=")
    if name and name not in METRICS:
        raise argparse.ArgumentTypeError(f"{name!r}: not a metric compare knows; use one of "
                                         f"{', '.join(METRICS)}")
    try:
        size = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: not a number; give e.g. 0.05") from None
    if not size > 0:
        raise argparse.ArgumentTypeError(f"{value}: give a positive fraction, e.g. 0.05")
    return (name or None), size


def _one_line_error(message: str) -> NoReturn:
    print(f"wanbench compare: {message}; see `wanbench compare --help`", file=sys.stderr)
    raise SystemExit(2)


def handle(args: argparse.Namespace) -> int:
    detect = dict(args.detect or [])
    options = engine.Options(
        metrics=tuple(args.metric) if args.metric else None, alpha=args.alpha,
        min_effect=args.min_effect, detect=detect.pop(None, 0.05), level=args.level,
        detect_for=tuple(sorted(detect.items())))
    try:
        report = build_report(args.base, args.candidates, options, force=args.force)
        text = render.FORMATS[args.format](report)
        if args.out and args.format == "html":
            # the page shows the runs themselves too, each kernel a series of its own
            runs = read_runs([args.base, *args.candidates])
            text += overlaid_figures(runs, args.out.parent)
        if args.out:
            args.out.write_text(text)
    except (ResultsFormatError, samples.NotARun, engine.Incomparable, Refused) as exc:
        print(f"wanbench compare: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"wanbench compare: {exc.filename or ''}: {exc.strerror or exc}; check the path "
              "and permissions", file=sys.stderr)
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


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare",
        help="base vs candidate run(s): change, interval, verdict; exit 1 on regression",
        description=(
            "Compare one or more candidate runs with a base run of the same scenario, point "
            "by point: relative change with its confidence interval, significance after "
            "Benjamini-Hochberg over the grid, and whether the data could have detected a "
            "regression at all (docs/compare.md). Refuses (exit 2) runs that differ in "
            "anything but the kernel and the machine's state, unless --force."),
        epilog=EXIT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("base", type=Path, metavar="BASE_RUN", help="base run directory")
    parser.add_argument("candidates", type=Path, nargs="+", metavar="CAND_RUN",
                        help="candidate run directory (several: each against the base)")
    parser.add_argument("--metric", action="append", choices=list(METRICS), metavar="METRIC",
                        help=f"metric column (repeatable; default: {', '.join(DEFAULT_METRICS)}"
                        f" where both runs measured it; any of: {', '.join(METRICS)})")
    parser.add_argument("--alpha", type=_fraction(True), default=0.05,
                        help="false discovery rate over the grid (default 0.05)")
    parser.add_argument("--min-effect", type=_fraction(False), default=0.02,
                        help="smaller relative changes are never a regression, however "
                        "significant (default 0.02 = 2 %%)")
    parser.add_argument("--detect", type=_detect, action="append", metavar="[METRIC=]FRACTION",
                        help="`~` promises a regression this large would have been detected; "
                        "rows that could not are inconclusive (default 0.05 = 5 %%; repeatable "
                        "per metric, e.g. --detect resp_time_p99_ms=1 for a doubling; a drop "
                        "of a higher-is-better metric must stay below 1)")
    parser.add_argument("--level", type=_fraction(True), default=0.95,
                        help="confidence level of the change's interval (default 0.95)")
    parser.add_argument("--format", choices=tuple(render.FORMATS), default="markdown",
                        help="report format (default markdown)")
    parser.add_argument("--out", type=Path, help="write the report here instead of stdout")
    parser.add_argument("--force", action="store_true",
                        help="compare runs of different experiments (scenario fields, tools, "
                        "CPU) anyway, with a loud warning")
    parser.error = _one_line_error  # type: ignore[method-assign]
    parser.set_defaults(func=handle)
