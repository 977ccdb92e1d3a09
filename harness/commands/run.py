"""`wanbench run`: run a scenario (or resume one) into a results directory. Here are its flags
and exit statuses; a scenario that does not load is refused here, before the runner is
imported (pandas, pyarrow: half a second of a refusal's time). The run on the terminal is
harness.commands.run_terminal's, the run itself harness.runner's run_scenario."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from clients.paths import REPO_ROOT
from harness.analysis.export_choices import PERCENTILE_COLUMNS, SUFFIXES, ExportError, check_path
from harness.commands import terminal
from harness.commands.cluster import add_access_options
from harness.results.format import SUMMARY_FILE
from harness.runner.refusal import EXIT_REFUSED
from harness.scenario import MAX_WAIT_S, ScenarioError, load
from harness.topology.backends import CHOICES as BACKEND_CHOICES


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run", help="run a scenario YAML into a results directory",
        description="Run every point × repetition of a scenario. Finished points are kept on "
                    "disk; --resume RUN_DIR continues an interrupted run.")
    parser.add_argument("scenario", nargs="?", type=Path, help="scenario YAML file")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "results",
                        help="results root (default: results/)")
    parser.add_argument("--resume", type=Path, metavar="RUN_DIR",
                        help="continue this run: skip the points it already finished")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a scenario field, e.g. --set cold.conns=1000")
    parser.add_argument("--backend", choices=BACKEND_CHOICES,
                        help="topology backend (default: the scenario's)")
    parser.add_argument("--allow-invalid", action="store_true",
                        help="exit 0 even when some point × repetition is invalid (not when the "
                             "scenario's thresholds could not be judged: exit 3)")
    parser.add_argument("--kernel", action="append", metavar="IMAGE",
                        help="run under this kernel: `host` (the running one, here) or a "
                        "kernel image booted in a guest (virtme-ng; the scenario's `guest` "
                        "sizes it); repeat for several, each a run of its own, then compared "
                        "with the first")
    parser.add_argument("--cluster", metavar="tls://HOST:PORT",
                        help="run on the hosts of a Dask scheduler's workers (`wanbench worker "
                             "--role ROLE` on each): the topology's hosts are those machines, "
                             "not brought up here")
    parser.add_argument("--json", metavar="FILE",
                        help=f"also write the run's {SUMMARY_FILE} (every run directory holds "
                             f"one: docs/results-format.md) here; - for standard output")
    parser.add_argument("--quiet-wait", type=_seconds, metavar="S",
                        help="before each point × repetition, wait up to S seconds for the "
                             "server's and generator's CPUs to be free of other tasks (the "
                             "scenario's quiet_wait_s; at most 1 %% busy), and say how long "
                             "it waited")
    parser.add_argument("--latency", action="store_true",
                        help="also print each point's response times at "
                             f"{', '.join(PERCENTILE_COLUMNS)} (corrected; "
                             "over its valid repetitions), as wrk --latency does")
    parser.add_argument("--export", type=_export_path, metavar="FILE",
                        help="also write the table of points (medians over valid repetitions) "
                             f"to FILE, as its suffix says: {', '.join(SUFFIXES)}")
    parser.add_argument("--export-timeseries", type=_export_path, metavar="FILE",
                        help="also write every per-second sample, its point named, to FILE "
                             f"({', '.join(SUFFIXES)})")
    add_access_options(parser)
    parser.epilog = EXIT_STATUSES + KERNELS_EXIT
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.set_defaults(func=handle)


EXIT_STATUSES = """exit status:
  0    every point × repetition measured and valid
  1    the run finished, but some are invalid (reasons in the table; --allow-invalid: 0)
  3    no verdict: the scenario has thresholds and some point no valid repetition to
       judge them on (with --allow-invalid too; before 1)
       (1 or 3: a line says when only others' work on the measured CPUs made repetitions
       invalid, the machine too busy to judge; summary.json: machine_too_busy)
  2    bad input or an error (scenario, missing tool, topology refused by calibration,
       a run directory that cannot be written or resumed: full, read-only, damaged, locked)
  99   the run finished, but a point's median crossed one of the scenario's thresholds
       (as k6's thresholds; before 3 and 1 when they apply too)
  130  stopped by SIGINT, 143 by SIGTERM (finished points kept; --resume continues)"""
KERNELS_EXIT = """
with --kernel: 2 when a kernel failed (the other kernels' runs are kept) or bad input;
  else 99, 3 or 1 as above, over every kernel's points; else the comparison's status
  (0 no regression, 1 regression, 3 inconclusive; 0 when no pair of kernels has
  comparable timings)"""


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= MAX_WAIT_S:
        raise argparse.ArgumentTypeError(f"{text!r}: give seconds from 0 to {MAX_WAIT_S:g}")
    return seconds


def _export_path(text: str) -> Path:
    try:
        return check_path(text)
    except ExportError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def handle(args: argparse.Namespace) -> int:
    console = terminal(args.verbosity)
    if args.kernel and args.cluster:
        print("wanbench run: --kernel boots guests on this machine and --cluster runs on other "
              "hosts; give one of them", file=sys.stderr)
        return EXIT_REFUSED
    if args.quiet_wait is not None:  # the scenario's field, as a --set would set it
        args.set.append(f"quiet_wait_s={args.quiet_wait}")
    if args.scenario is not None and args.resume is None:
        # the runner loads it again, as here: this only refuses it sooner
        try:
            load(args.scenario, list(args.set))
        except (ScenarioError, FileNotFoundError) as exc:
            print(f"wanbench run: {exc}", file=sys.stderr)
            return EXIT_REFUSED
    from harness.commands import run_terminal
    return run_terminal.run(args, console)
