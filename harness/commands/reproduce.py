"""`wanbench reproduce [--run] [--check] [RESULTS ...]`: run every paper target's scenario
from one revision, and judge the runs against the papers' shapes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.commands import terminal
from harness.commands.run_terminal import TerminalDisplay
from harness.reproduce import beyond
from harness.reproduce.check import check_all, history_all
from harness.reproduce.run import ReproduceError, prune_raw, reproduce
from harness.reproduce.status import StatusFileError, lines, write_status
from harness.reproduce.summary import reference_summary
from harness.reproduce.verdict import Status
from harness.results.format import ResultsFormatError
from harness.results.runset import read_runs
from harness.scenario import ScenarioError, recorded

EXIT_HELP = """\
exit status:
  0  every scenario ran (with --run) and no target failed: each is PASS, NOT RUN or
     NOT POSSIBLE HERE
  1  at least one target FAILed its paper's shape
  2  bad input: results not found or unreadable, a status file without its markers,
     uncommitted changes with --run (see --allow-dirty), a scenario that could not run
"""


def _fail(message: str) -> int:
    print(f"wanbench reproduce: {message}", file=sys.stderr)
    return 2


def _run(args: argparse.Namespace) -> int | None:
    """Runs the scenarios into the one RESULTS folder; an exit code when that failed."""
    if len(args.results) != 1:
        return _fail("--run writes into one folder: give one RESULTS")
    # --beyond names beyond.SCENARIOS, so that `make beyond` keeps no list of its own
    only = list(beyond.SCENARIOS) if args.beyond else args.only
    try:
        display = TerminalDisplay(terminal(args.verbosity), quiet=args.verbosity < 0,
                                  allow_invalid=True)
        summary = reproduce(args.results[0], quick=args.quick, allow_dirty=args.allow_dirty,
                            only=only, display=display)
    except (ReproduceError, ScenarioError) as exc:
        return _fail(str(exc))
    if args.prune_raw:
        prune_raw(args.results[0])
    ran = len(only) if only else len(summary["scenarios"])
    kept = len(summary["scenarios"]) - ran
    print(f"ran {ran} scenarios in {summary['seconds'] / 60:.1f} min "
          f"(budget {summary['budget_s'] / 60:.0f} min), revision {summary['revision']}"
          + (f"; kept {kept} from earlier runs ({', '.join(summary['revisions'])})"
             if kept else ""))
    if not summary["finished"]:
        return _fail("not every scenario ran (see above); the runs that finished are kept")
    return None


def handle(args: argparse.Namespace) -> int:
    if not (args.run or args.check):
        return _fail("say --run (run the scenarios), --check (judge runs), or both")
    if args.run and (code := _run(args)) is not None:
        return code
    if not args.check:
        return 0
    try:
        runs = read_runs(args.results, recorded)
    except ResultsFormatError as exc:
        return _fail(str(exc))
    results = check_all(runs)
    print("\n".join(lines(results)))
    if args.write_status:
        try:
            summary = reference_summary(Path(args.results[0]), runs) if args.results else None
            write_status(args.write_status, results, " ".join(map(str, args.results)),
                         history_all(runs), summary, beyond.markdown(beyond.findings(runs)))
        except (StatusFileError, OSError) as exc:
            return _fail(str(exc))
        print(f"status table: {args.write_status}")
    return 1 if any(r.status == Status.FAIL for r in results) else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "reproduce",
        help="run the papers' targets and judge them (PASS / FAIL / NOT RUN / NOT POSSIBLE HERE)",
        description="--run runs every reproduction scenario (scenarios/*.yaml of the targets) "
        "into RESULTS from one clean revision; --check evaluates each target's shape checks, "
        "written from its paper, on the newest run of its scenario among RESULTS.",
        epilog=EXIT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="*", type=Path, default=[Path("results/reference")],
                        metavar="RESULTS", help="run directories or folders of them "
                        "(default results/reference)")
    parser.add_argument("--run", action="store_true",
                        help="run the scenarios into RESULTS first; when all finished, older "
                        "runs of them there are removed")
    parser.add_argument("--check", action="store_true", help="judge the runs")
    parser.add_argument("--quick", action="store_true",
                        help="with --run: each sweep axis at its first level, one 1 s "
                        "repetition (a smoke test of the pipeline, not a reproduction)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--only", nargs="+", metavar="SCENARIO",
                       help="with --run: only these scenarios (file names without .yaml)")
    which.add_argument("--beyond", action="store_true",
                       help="with --run: only the sweeps beyond the papers "
                       "(harness/reproduce/beyond.py), which the papers' run leaves out")
    parser.add_argument("--allow-dirty", action="store_true",
                        help="with --run: accept uncommitted changes (the manifests say dirty)")
    parser.add_argument("--prune-raw", action="store_true",
                        help="with --run: drop raw documents and per-point records afterwards "
                        "(the Parquet tables keep everything the analysis reads)")
    parser.add_argument("--write-status", type=Path, metavar="FILE",
                        help="with --check: rewrite the generated status table in FILE "
                        "(e.g. REPRODUCTION.md)")
    parser.set_defaults(func=handle)
