"""`wanbench run`: run a scenario (or resume one) into a results directory. Here are its flags,
exit statuses and terminal (TerminalDisplay); the run is harness.runner's run_scenario, and
the kernels' runs harness.runner.kernels'."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from clients.paths import REPO_ROOT
from harness import interrupts
from harness.analysis import export
from harness.analysis.numbers import (
    column_unit,
    in_column_unit,
    metric,
    point_label,
    short_name,
)
from harness.analysis.summary import (
    EXIT_INVALID,
    EXIT_THRESHOLDS,
    EXIT_UNJUDGED,
    PointSummary,
    gate,
    reason_lines,
)
from harness.cluster import ClusterError
from harness.cluster.run import ClusterHosts
from harness.cluster.security import access
from harness.commands import LOGGER, terminal
from harness.commands.cluster import add_access_options
from harness.guest import kernels
from harness.guest.machine import GuestError
from harness.results.store import write_json
from harness.runner.display import Advance
from harness.runner.kernels import run_kernels
from harness.runner.outcome import (
    EXIT_REFUSED,
    RunRefused,
    RunRequest,
    RunResult,
)
from harness.runner.scenario_run import SUMMARY_FILE, load_request, run_scenario
from harness.scenario import MAX_WAIT_S, ScenarioError
from harness.topology.backends import CHOICES as BACKEND_CHOICES

# The terminal table's metrics (summary.json holds every one); names and formats: numbers.
# The in-kernel time per dispatch call shows only where kernel_trace measured it.
SUMMARY_METRICS = ("reply_rate_rps", "stream_throughput_mbps", "cpu_server_pct",
                   "resp_time_p50_ms", "resp_time_p99_ms", "kernel_dispatch_ns_per_call",
                   "steal_pct")
log = logging.getLogger(LOGGER)


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
                             f"{', '.join(export.PERCENTILE_COLUMNS)} (corrected; "
                             "over its valid repetitions), as wrk --latency does")
    parser.add_argument("--export", type=_export_path, metavar="FILE",
                        help="also write the table of points (medians over valid repetitions) "
                             f"to FILE, as its suffix says: {', '.join(export.SUFFIXES)}")
    parser.add_argument("--export-timeseries", type=_export_path, metavar="FILE",
                        help="also write every per-second sample, its point named, to FILE "
                             f"({', '.join(export.SUFFIXES)})")
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
        return export.check_path(text)
    except export.ExportError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _exports(args: argparse.Namespace, result: RunResult, console: Console) -> None:
    """--latency, --export, --export-timeseries: what a finished run also prints or writes."""
    run_dir, summaries = result.run_dir, result.summaries
    shown = [m for m in SUMMARY_METRICS if any(s.medians.get(m) is not None for s in summaries)]
    try:
        if args.latency and summaries:
            _print_latency(export.percentiles(run_dir, summaries), console,
                           to_stderr=args.json == "-")
        if args.export:
            table = export.table(summaries, shown)
            console.print(f"table: {export.write(table, args.export, result.notes)}")
        if args.export_timeseries and (run_dir / "timeseries.parquet").is_file():
            frame = export.timeseries(run_dir)
            console.print(f"time series: {export.write(frame, args.export_timeseries)}")
    except export.ExportError as exc:
        log.error("%s; the run is in %s", exc, run_dir)


def _print_latency(frame: Any, console: Console, to_stderr: bool) -> None:
    """The percentiles of each point, a column per sweep axis as in the run's table."""
    table = Table(title="response times (corrected), over valid repetitions",
                  box=box.SIMPLE_HEAD, pad_edge=False)
    axes = [c for c in frame.columns if c not in (*export.PERCENTILE_COLUMNS, "valid")]
    for column in axes or ["point"]:
        table.add_column(short_name(column), no_wrap=True)
    for column in export.PERCENTILE_COLUMNS:
        table.add_column("max" if column == "p100" else column, justify="right", no_wrap=True)
    for row in frame.to_dict("records"):
        cells = [metric(a, row[a]) for a in axes] or ["point"]
        cells[-1] += "" if row["valid"] else "*"
        table.add_row(*cells, *(metric("latency_ms", row[c]) for c in export.PERCENTILE_COLUMNS),
                      style=None if row["valid"] else "yellow")
    (console if to_stderr else Console(file=sys.stdout)).print(table)
    if not frame["valid"].all():
        console.print("* no valid repetition: its invalid ones', not a result", highlight=False)


def request_of(args: argparse.Namespace) -> RunRequest:
    """The run the flags ask for."""
    return RunRequest(scenario=args.scenario, sets=tuple(args.set), resume=args.resume,
                      out=args.out, backend=args.backend, allow_invalid=args.allow_invalid)


def handle(args: argparse.Namespace) -> int:
    console = terminal(args.verbosity)
    if args.kernel and args.cluster:
        print("wanbench run: --kernel boots guests on this machine and --cluster runs on other "
              "hosts; give one of them", file=sys.stderr)
        return EXIT_REFUSED
    if args.quiet_wait is not None:  # the scenario's field, as a --set would set it
        args.set.append(f"quiet_wait_s={args.quiet_wait}")
    if args.kernel:
        return _run_kernels(args, console)
    display = TerminalDisplay(console, quiet=args.verbosity < 0,
                              allow_invalid=args.allow_invalid, table_to_stderr=args.json == "-")
    try:
        hosts = ClusterHosts(access(args.cluster, args.certs, args.insecure)) \
            if args.cluster else None
        result = run_scenario(request_of(args), display, hosts)
    except (RunRefused, ClusterError) as exc:
        print(f"wanbench run: {exc}", file=sys.stderr)  # unwrapped: one line per problem
        return EXIT_REFUSED
    if args.json:
        _also_write_summary(result, args.json)
    if result.stop is None:
        _exports(args, result, console)
    return result.status


def _also_write_summary(result: RunResult, also: str) -> None:
    """The run's summary.json where --json asks too (- : standard output)."""
    doc = json.loads((result.run_dir / SUMMARY_FILE).read_text())
    if also == "-":
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    try:
        write_json(Path(also), doc)
    except OSError as exc:
        log.error("--json %s: %s; the summary is in %s", also, exc.strerror,
                  result.run_dir / SUMMARY_FILE)


class TerminalDisplay:
    """A run on the terminal: the `wanbench` log's lines, rich's progress bar, then the
    table of medians, where the run is and its exit status explained."""

    def __init__(self, console: Console, quiet: bool, allow_invalid: bool,
                 table_to_stderr: bool = False):
        self.console, self.quiet = console, quiet
        self.allow_invalid, self.table_to_stderr = allow_invalid, table_to_stderr

    def info(self, line: str) -> None:
        log.info("%s", line)

    def warning(self, line: str) -> None:
        log.warning("%s", line)

    @contextlib.contextmanager
    def progress(self, total: int) -> Iterator[Advance]:
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("ETA"), TimeRemainingColumn())
        with Progress(*columns, console=self.console, transient=False,
                      disable=self.quiet) as bar:
            task = bar.add_task("points", total=total)
            yield lambda: bar.advance(task)

    def outcome(self, result: RunResult) -> None:
        _print_summary(result, self.console, self.table_to_stderr)
        if result.stop is not None:
            self.console.print(
                f"[yellow]{result.stop.reason}[/yellow]: {result.finished} of {result.total} "
                f"finished points kept in {result.run_dir}; continue with: wanbench run "
                f"--resume {result.run_dir}", highlight=False)
        else:
            self.console.print(f"results: {result.run_dir}")
            self._explain_status(result)

    def _explain_status(self, result: RunResult) -> None:
        _explain(result.summaries, self.allow_invalid, self.console)


def _explain(summaries: list[PointSummary], allow_invalid: bool, console: Console) -> int:
    """A finished run's exit status (harness.analysis.summary.gate), and why, printed."""
    verdict = gate(summaries, allow_invalid)
    for point, check in verdict.crossed:
        unit = column_unit(check.metric)
        console.print(f"[red]threshold crossed[/red] {point_label(point.parameters)}: "
                      f"{check.metric} {in_column_unit(check.metric, check.value)}, the "
                      f"scenario asks {check.threshold}{' ' + unit if unit else ''}",
                      highlight=False)
    busy = verdict.too_busy()
    if busy:
        console.print(f"[yellow]{busy}[/yellow]", highlight=False)
    if verdict.unjudged:
        console.print(f"[yellow]thresholds not judged[/yellow] on {len(verdict.unjudged)} "
                      f"point(s) without a valid repetition: no verdict, exit "
                      f"{EXIT_UNJUDGED} (with --allow-invalid too)", highlight=False)
    if verdict.invalid and not allow_invalid:
        console.print(f"[yellow]{verdict.invalid} point × repetition(s) invalid[/yellow]"
                      + (f": exit {EXIT_INVALID} (--allow-invalid to exit 0)"
                         if verdict.status == EXIT_INVALID else ""), highlight=False)
    if verdict.crossed:
        console.print(f"{len(verdict.crossed)} threshold check(s) crossed: exit "
                      f"{EXIT_THRESHOLDS}", highlight=False)
    return verdict.status


def _run_kernels(args: argparse.Namespace, console: Console) -> int:
    """The scenario under each --kernel, each a run of its own, then their comparison."""
    if args.resume is not None:
        print("wanbench run: --kernel starts new runs and --resume continues one; resume "
              "without --kernel (the run's manifest says which kernel it ran on)",
              file=sys.stderr)
        return EXIT_REFUSED
    try:
        scenario, _, _ = load_request(request_of(args))
        kernels.check_kernels(args.kernel)
    except (ScenarioError, FileNotFoundError, GuestError) as exc:
        print(f"wanbench run: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    # only here: the compare machinery (scipy) would slow every run's start, in guests most
    from harness.guest.comparison import print_comparison

    request = RunRequest(scenario=args.scenario.resolve(), sets=tuple(args.set),
                         out=args.out.resolve(), backend=args.backend, allow_invalid=True)
    try:
        with interrupts.raising():  # SIGTERM too stops the guest (its `finally`) and the run
            outcomes = run_kernels(scenario, args.kernel, request, log.info)
    except interrupts.Interrupted as exc:
        console.print(f"[yellow]{exc.reason}[/yellow]: the kernels' finished runs are kept in "
                      f"{args.out}", highlight=False)
        return exc.exit_status
    finished = [o.result for o in outcomes if o.result and not o.error]
    compared = print_comparison([result.run_dir for result in finished], console)
    failed = [o for o in outcomes if o.error]
    for outcome in failed:
        console.print(f"[red]kernel {outcome.kernel} failed[/red]: {outcome.error}",
                      highlight=False)
    if failed:
        return EXIT_REFUSED
    # each kernel's points as a run's: invalid ones or unjudged thresholds fail as in `run`
    points = [summary for result in finished for summary in result.summaries]
    return _explain(points, args.allow_invalid, console) or compared


def _print_summary(result: RunResult, console: Console, to_stderr: bool) -> None:
    """The table of medians over valid repetitions, in the sweep's order, at 80 columns; a
    point without a valid repetition shows what its invalid ones measured, marked, and every
    invalid repetition's reason is listed below."""
    summaries = result.summaries
    if not summaries:
        return
    axes = list(summaries[0].parameters)
    shown = [m for m in SUMMARY_METRICS
             if any(s.medians.get(m) is not None for s in summaries)]
    # Borderless (rich's SIMPLE_HEAD): a sweep of two axes and six metrics fits 80 columns.
    table = Table(title=f"{result.scenario_name}: median over valid repetitions",
                  box=box.SIMPLE_HEAD, pad_edge=False)
    for column in axes:
        table.add_column(short_name(column), no_wrap=True)
    for column in shown:
        table.add_column(short_name(column), justify="right", no_wrap=True)
    table.add_column("valid", justify="right", no_wrap=True)
    for point in summaries:
        cells = [metric(axis, point.parameters[axis]) for axis in axes]
        cells += [metric(m, point.medians.get(m)) + ("*" if point.medians_of_invalid else "")
                  for m in shown]
        table.add_row(*cells, f"{point.valid}/{point.total}",
                      style="yellow" if point.medians_of_invalid else None)
    (console if to_stderr else Console(file=sys.stdout)).print(table)
    if any(point.medians_of_invalid for point in summaries):
        console.print("* no valid repetition: the median of the invalid ones, not a result",
                      highlight=False)
    for note in result.notes:
        console.print(f"[yellow]{note}[/yellow]", highlight=False)
    for line in reason_lines(summaries):
        console.print(f"[yellow]invalid[/yellow] {line}", highlight=False)
