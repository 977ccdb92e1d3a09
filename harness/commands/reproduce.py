"""`wanbench reproduce --check [RESULTS ...]`: each paper target's verdict, from its runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.reproduce.check import check_all
from harness.reproduce.status import StatusFileError, lines, write_status
from harness.reproduce.verdict import Status
from harness.results.format import ResultsFormatError
from harness.results.runset import read_runs

EXIT_HELP = """\
exit status:
  0  no target failed (each is PASS, NOT RUN or NOT POSSIBLE HERE)
  1  at least one target FAILed its paper's shape
  2  bad input: results not found or unreadable, a status file without its markers
"""


def handle(args: argparse.Namespace) -> int:
    if not args.check:
        print("wanbench reproduce: say --check to judge runs against the papers",
              file=sys.stderr)
        return 2
    try:
        runs = read_runs(args.results)
    except ResultsFormatError as exc:
        print(f"wanbench reproduce: {exc}", file=sys.stderr)
        return 2
    results = check_all(runs)
    print("\n".join(lines(results)))
    if args.write_status:
        try:
            write_status(args.write_status, results, " ".join(map(str, args.results)))
        except (StatusFileError, OSError) as exc:
            print(f"wanbench reproduce: {exc}", file=sys.stderr)
            return 2
        print(f"status table: {args.write_status}")
    return 1 if any(r.status == Status.FAIL for r in results) else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "reproduce",
        help="judge runs against the papers' shapes (PASS / FAIL / NOT RUN / NOT POSSIBLE HERE)",
        description="Evaluate each reproduction target's shape checks, written from its "
        "paper, on the newest run of its scenario among RESULTS.",
        epilog=EXIT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="*", type=Path, default=[Path("results/reference")],
                        metavar="RESULTS", help="run directories or folders of them "
                        "(default results/reference)")
    parser.add_argument("--check", action="store_true", help="judge the runs (required)")
    parser.add_argument("--write-status", type=Path, metavar="FILE",
                        help="also rewrite the generated status table in FILE "
                        "(e.g. REPRODUCTION.md)")
    parser.set_defaults(func=handle)
