"""`wanbench run` on a terminal, once its scenario loaded (harness.commands.run: flags, exit
statuses, refusals of a scenario that does not load): the `wanbench` log's lines and rich's
progress bar while it runs (TerminalDisplay), the table of medians and its exit status
explained, --latency and --export; the scenario under each --kernel, then their comparison."""

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

from harness import interrupts
from harness.analysis import export
from harness.analysis.export_choices import PERCENTILE_COLUMNS, ExportError
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
from harness.commands import LOGGER
from harness.guest import kernels
from harness.guest.machine import GuestError
from harness.results.format import SUMMARY_FILE
from harness.results.store import write_json
from harness.runner.display import Advance
from harness.runner.kernels import run_kernels
from harness.runner.outcome import RunRequest, RunResult
from harness.runner.refusal import EXIT_REFUSED, RunRefused
from harness.runner.scenario_run import load_request, run_scenario
from harness.scenario import ScenarioError

# The terminal table's metrics (summary.json holds every one); names and formats: numbers.
# The in-kernel time per dispatch call shows only where kernel_trace measured it.
SUMMARY_METRICS = ("reply_rate_rps", "stream_throughput_mbps", "cpu_server_pct",
                   "resp_time_p50_ms", "resp_time_p99_ms", "kernel_dispatch_ns_per_call",
                   "steal_pct")
log = logging.getLogger(LOGGER)


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
    except ExportError as exc:
        log.error("%s; the run is in %s", exc, run_dir)


def _print_latency(frame: Any, console: Console, to_stderr: bool) -> None:
    """The percentiles of each point, a column per sweep axis as in the run's table."""
    table = Table(title="response times (corrected), over valid repetitions",
                  box=box.SIMPLE_HEAD, pad_edge=False)
    axes = [c for c in frame.columns if c not in (*PERCENTILE_COLUMNS, "valid")]
    for column in axes or ["point"]:
        table.add_column(short_name(column), no_wrap=True)
    for column in PERCENTILE_COLUMNS:
        table.add_column("max" if column == "p100" else column, justify="right", no_wrap=True)
    for row in frame.to_dict("records"):
        cells = [metric(a, row[a]) for a in axes] or ["point"]
        cells[-1] += "" if row["valid"] else "*"
        table.add_row(*cells, *(metric("latency_ms", row[c]) for c in PERCENTILE_COLUMNS),
                      style=None if row["valid"] else "yellow")
    (console if to_stderr else Console(file=sys.stdout)).print(table)
    if not frame["valid"].all():
        console.print("* no valid repetition: its invalid ones', not a result", highlight=False)


def request_of(args: argparse.Namespace) -> RunRequest:
    """The run the flags ask for."""
    return RunRequest(scenario=args.scenario, sets=tuple(args.set), resume=args.resume,
                      out=args.out, backend=args.backend, allow_invalid=args.allow_invalid)


def run(args: argparse.Namespace, console: Console) -> int:
    """The run the flags ask for (harness.commands.run has refused what it could)."""
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
