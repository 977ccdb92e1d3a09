"""`wanbench run`: run a scenario (or resume one) into a results directory."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from clients.paths import REPO_ROOT, MissingBinary
from harness import interrupts, manifest
from harness.analysis import derive
from harness.analysis.numbers import metric, point_label, short_name
from harness.analysis.summary import PointSummary, reason_lines, thresholds_crossed
from harness.cluster import ClusterError
from harness.cluster.security import access
from harness.commands import LOGGER, terminal
from harness.commands.cluster import add_access_options
from harness.guest import kernels, record
from harness.guest.machine import GuestError
from harness.metrics import perf
from harness.results.format import ResultsFormatError
from harness.results.store import RunDir, RunDirError, write_json
from harness.runner.context import RunContext
from harness.runner.run import (
    MissingTool,
    PointSource,
    check_topologies,
    kernel_trace,
    pending,
    preflight,
    run_manifest,
    run_points,
    session_manifest,
)
from harness.scenario import Point, Scenario, ScenarioError, load, points, recorded
from harness.topology import TopologyError
from harness.topology.backend_probe import BACKENDS

EXIT_USAGE = 2
# The terminal table's metrics (summary.json holds every one); names and formats: numbers.
# The in-kernel time per dispatch call shows only where kernel_trace measured it.
SUMMARY_METRICS = ("reply_rate_rps", "stream_throughput_mbps", "cpu_server_pct",
                   "resp_time_p50_ms", "resp_time_p99_ms", "kernel_dispatch_ns_per_call",
                   "steal_pct")
SUMMARY_FILE = "summary.json"
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
    parser.add_argument("--backend", choices=BACKENDS,
                        help="topology backend (default: the scenario's)")
    parser.add_argument("--allow-invalid", action="store_true",
                        help="exit 0 even when some point × repetition is invalid")
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
    add_access_options(parser)
    parser.epilog = EXIT_STATUSES + KERNELS_EXIT
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.set_defaults(func=handle)


EXIT_STATUSES = """exit status:
  0    every point × repetition measured and valid
  1    the run finished, but some are invalid (reasons in the table; --allow-invalid: 0)
  2    bad input or an error (scenario, missing tool, topology refused by calibration,
       a run directory that cannot be written or resumed: full, read-only, damaged, locked)
  99   the run finished, but a point's median crossed one of the scenario's thresholds
       (as k6's thresholds; before 1 when both apply)
  130  stopped by SIGINT, 143 by SIGTERM (finished points kept; --resume continues)"""
EXIT_INVALID = 1
EXIT_THRESHOLDS = 99
KERNELS_EXIT = """
with --kernel: the comparison's status (0 no regression, 1 regression, 3 inconclusive;
  0 when no pair of kernels has comparable timings), 2 when a kernel failed (the other
  kernels' runs are kept) or bad input"""


def _recorded_scenario(run_dir: RunDir) -> Scenario:
    """The scenario a run recorded: exactly what was run, validated when it ran."""
    manifest = run_dir.read_manifest()
    if manifest.get("scenario_dir") is None:
        raise ResultsFormatError(f"{run_dir.manifest_path}: no \"scenario_dir\": the run "
                                 f"cannot be resumed; start a new run")
    return recorded(manifest, str(run_dir.manifest_path))


def _load(args: argparse.Namespace) -> tuple[Scenario, Path, RunDir | None]:
    if args.resume is not None:
        scenario = _recorded_scenario(RunDir(args.resume))  # before the run is touched
        if args.scenario is not None and load(args.scenario, args.set) != scenario:
            raise ScenarioError(f"{args.scenario} differs from the scenario recorded in "
                                f"{args.resume / 'manifest.json'}; resume without SCENARIO to "
                                f"finish what was recorded, or start a new run")
        run_dir = RunDir.open(args.resume)
        return scenario, Path(run_dir.read_manifest()["scenario_dir"]), run_dir
    if args.scenario is None:
        raise ScenarioError("no scenario given: wanbench run SCENARIO.yaml "
                            "(or --resume RUN_DIR)")
    return load(args.scenario, args.set), args.scenario.resolve().parent, None


def handle(args: argparse.Namespace) -> int:
    console = terminal(args.verbosity)
    if args.kernel and args.cluster:
        print("wanbench run: --kernel boots guests on this machine and --cluster runs on other "
              "hosts; give one of them", file=sys.stderr)
        return EXIT_USAGE
    if args.kernel:
        return _run_kernels(args, console)
    try:
        scenario, scenario_dir, run_dir = _load(args)
    except (ScenarioError, FileNotFoundError, ResultsFormatError, RunDirError) as exc:
        print(f"wanbench run: {exc}", file=sys.stderr)  # unwrapped: one line per problem
        return EXIT_USAGE
    with contextlib.ExitStack() as stack:
        if run_dir is not None:
            stack.enter_context(run_dir)  # its writer's lock, released on the way out
        try:
            check_topologies(scenario, scenario_dir)
            cluster = _cluster(args, stack, scenario, scenario_dir, run_dir)
            if cluster is None:
                preflight(scenario)  # a cluster's workers check what they will run
            return _run(args, console, scenario, scenario_dir, run_dir, cluster, stack)
        except (MissingBinary, MissingTool, ClusterError, RunDirError,
                ResultsFormatError) as exc:
            print(f"wanbench run: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except TopologyError as exc:
            print(f"wanbench run: the scenario's topology (topology.file, topology.set): {exc}",
                  file=sys.stderr)
            return EXIT_USAGE


def _cluster(args: argparse.Namespace, stack: contextlib.ExitStack, scenario: Scenario,
             scenario_dir: Path, run_dir: RunDir | None) -> Cluster | None:
    """With --cluster: the scheduler's client (closed with stack), where each topology's
    points run and the manifest's cluster block; ClusterError before anything starts."""
    recorded = run_dir.read_manifest().get("cluster") if run_dir else None
    if run_dir is not None and bool(recorded) != bool(args.cluster):
        raise ClusterError(f"{run_dir.path} was run " + (
            f"across the cluster of {recorded['scheduler']}: resume it with --cluster "
            f"tls://HOST:PORT" if recorded else "on one machine: resume it without --cluster"))
    if not args.cluster:
        return None
    from harness.cluster import coordinator, session  # the cluster extra: only here

    client = stack.enter_context(coordinator.connect(access(args.cluster, args.certs,
                                                           args.insecure)))
    found = session.placements(client, scenario, scenario_dir)
    block = session.describe(client, args.cluster, found)
    return Cluster(client, found, block)


@dataclass
class Cluster:
    client: Any
    placements: dict[str, Any]  # topology key → harness.cluster.placement.Placement
    manifest: dict[str, Any]


def _run(args: argparse.Namespace, console: Console, scenario: Scenario, scenario_dir: Path,
         run_dir: RunDir | None, cluster: Cluster | None, stack: contextlib.ExitStack) -> int:
    counters, reason = perf.hardware_counters()
    machine = manifest.collect()
    resumed = run_dir is not None
    if run_dir is None:
        run_dir = stack.enter_context(
            RunDir.create(args.out, scenario.name, machine["kernel"]["release"]))
    ctx = RunContext(scenario=scenario, scenario_dir=scenario_dir, run_dir=run_dir,
                     run_id=run_dir.run_id, tsc_hz=machine["cpu"]["tsc_hz"],
                     hardware_counters=counters,
                     backend=args.backend, on_event=log.info,
                     guest=record.current(), cluster=cluster.manifest if cluster else {})
    source = None
    if cluster is not None:
        from harness.cluster.session import ClusterPoints

        source = ClusterPoints(ctx, cluster.client, cluster.placements)
        ctx.topology_manifest.update(file=scenario.topology.file, backend="cluster")
    if not counters:
        log.info("no hardware counters: %s; cycles are estimated from CPU time × TSC "
                 "frequency and labelled cycles_estimated", reason)
    trace = kernel_trace(scenario)
    if trace is not None and not trace.tracepoints:
        log.warning("kernel_trace cannot run here: %s; the kernel_* columns are null",
                    trace.detail)
    elif trace is not None:
        log.info("kernel_trace: %s", trace.function_grain())
    todo = pending(scenario, run_dir.finished())
    total = len(todo) + len(run_dir.finished())
    log.info("run %s: %d of %d point × repetition to measure", run_dir.path, len(todo), total)
    session = session_manifest(ctx, machine, reason)
    if resumed:
        run_dir.begin_resumption(session)
    else:
        run_dir.begin_run(run_manifest(ctx), session)
    stopped = _run_with_progress(ctx, todo, console, source, quiet=args.verbosity < 0)
    run_dir.save_session()
    summaries = _summaries(run_dir, scenario)
    _print_summary(summaries, scenario, console, to_stderr=args.json == "-")
    done = len(run_dir.finished())
    if stopped is not None:
        why, status = stopped
        console.print(f"[yellow]{why}[/yellow]: {done} of {total} finished points kept in "
                      f"{run_dir.path}; continue with: wanbench run --resume {run_dir.path}",
                      highlight=False)
    else:
        console.print(f"results: {run_dir.path}")
        status = _status(summaries, args.allow_invalid, console)
    _write_summary(run_dir, summaries, status, args.json)
    return status


def _status(summaries: list[PointSummary], allow_invalid: bool, console: Console) -> int:
    """A finished run's exit status: a crossed threshold, then invalid repetitions."""
    crossed = thresholds_crossed(summaries)
    for point, check in crossed:
        console.print(f"[red]threshold crossed[/red] {point_label(point.parameters)}: "
                      f"{check.metric} {metric(check.metric, check.value)}, the scenario "
                      f"asks {check.threshold}", highlight=False)
    unjudged = [s for s in summaries if any(c.passed is None for c in s.thresholds)]
    if unjudged:
        console.print(f"[yellow]thresholds not judged[/yellow] on {len(unjudged)} point(s) "
                      f"without a valid repetition", highlight=False)
    invalid = sum(s.total - s.valid for s in summaries)
    if invalid and not allow_invalid:
        console.print(f"[yellow]{invalid} point × repetition(s) invalid[/yellow]: exit "
                      f"{EXIT_INVALID} (--allow-invalid to exit 0)", highlight=False)
    if crossed:
        console.print(f"{len(crossed)} threshold check(s) crossed: exit {EXIT_THRESHOLDS}",
                      highlight=False)
        return EXIT_THRESHOLDS
    return EXIT_INVALID if invalid and not allow_invalid else 0


def _summaries(run_dir: RunDir, scenario: Scenario) -> list[PointSummary]:
    import pandas as pd  # only here: validation errors should come back fast

    from harness.analysis.summary import summarise

    path = run_dir.path / "points.parquet"
    if not path.is_file():
        return []
    axes = run_dir.read_manifest()["sweep_axes"]
    return summarise(derive.add_derived(pd.read_parquet(path)), axes,
                     [p.point_id for p in points(scenario)], scenario.thresholds)


def _write_summary(run_dir: RunDir, summaries: list[PointSummary], status: int,
                   also: str | None) -> None:
    """summary.json in the run directory, and where --json asks (- : standard output)."""
    from harness.analysis.summary import document

    doc = document(run_dir.read_manifest(), summaries, status)
    write_json(run_dir.path / SUMMARY_FILE, doc)
    if also == "-":
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    elif also:
        try:
            write_json(Path(also), doc)
        except OSError as exc:
            log.error("--json %s: %s; the summary is in %s", also, exc.strerror,
                      run_dir.path / SUMMARY_FILE)


def _run_kernels(args: argparse.Namespace, console: Console) -> int:
    """The scenario under each --kernel, each a run of its own, then their comparison."""
    if args.resume is not None:
        print("wanbench run: --kernel starts new runs and --resume continues one; resume "
              "without --kernel (the run's manifest says which kernel it ran on)",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        scenario, _, _ = _load(args)
        kernels.check_kernels(args.kernel)
    except (ScenarioError, FileNotFoundError, GuestError) as exc:
        print(f"wanbench run: {exc}", file=sys.stderr)
        return EXIT_USAGE
    # only here: the compare machinery (scipy) would slow every run's start, in guests most
    from harness.guest.comparison import print_comparison

    try:
        with interrupts.raising():  # SIGTERM too stops the guest (its `finally`) and the run
            outcomes = kernels.run_kernels(args.scenario, scenario, args.kernel, args.out,
                                           args.set, args.backend, log.info)
    except interrupts.Interrupted as exc:
        console.print(f"[yellow]{exc.reason}[/yellow]: the kernels' finished runs are kept in "
                      f"{args.out}", highlight=False)
        return exc.exit_status
    status = print_comparison([o.run_dir for o in outcomes if o.run_dir and not o.error],
                              console)
    failed = [o for o in outcomes if o.error]
    for outcome in failed:
        console.print(f"[red]kernel {outcome.kernel} failed[/red]: {outcome.error}",
                      highlight=False)
    return EXIT_USAGE if failed else status


def _run_with_progress(ctx: RunContext, todo: list[tuple[Point, int]], console: Console,
                       source: PointSource | None, quiet: bool) -> tuple[str, int] | None:
    """Runs the points; returns why it stopped early (a signal, a refused topology) and the
    exit status that says so, or None."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("ETA"), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False, disable=quiet) as bar:
        task = bar.add_task("points", total=len(todo))

        def advance(point: Point, rep: int, row: dict[str, Any]) -> None:
            shown = next((f"{metric(m, row[m])} {short_name(m)}" for m in
                          ("reply_rate_rps", "stream_throughput_mbps")
                          if row.get(m) is not None), "")
            invalid = "" if row.get("valid") else " (invalid: the reason follows the table)"
            log.info("%s rep %d: %s%s", point_label(point.sweep_values), rep, shown, invalid)
            bar.advance(task)

        received: list[int] = []

        async def main_task() -> None:
            loop = asyncio.get_running_loop()
            current = asyncio.current_task()
            assert current is not None

            def stop(signum: int) -> None:
                if received:  # already stopping: a second signal must not cut the teardown short
                    return
                received.append(signum)
                current.cancel()

            for sig in interrupts.STOP_SIGNALS:
                loop.add_signal_handler(sig, stop, sig)
            await run_points(ctx, todo, advance, source)

        try:
            asyncio.run(main_task())
        except interrupts.Interrupted as exc:  # raised while a topology was coming up
            return exc.reason, exc.exit_status
        except (asyncio.CancelledError, KeyboardInterrupt):
            stop = interrupts.Interrupted(received[0] if received else signal.SIGINT)
            return stop.reason, stop.exit_status
        except TopologyError as exc:
            # e.g. calibration out of tolerance: measuring on a wrong link would mislead.
            return f"topology refused: {exc}", EXIT_USAGE
    return None


def _print_summary(summaries: list[PointSummary], scenario: Scenario, console: Console,
                   to_stderr: bool) -> None:
    """The table of medians over valid repetitions, in the sweep's order, at 80 columns; a
    point without a valid repetition shows what its invalid ones measured, marked, and every
    invalid repetition's reason is listed below."""
    if not summaries:
        return
    axes = list(summaries[0].parameters)
    shown = [m for m in SUMMARY_METRICS
             if any(s.medians.get(m) is not None for s in summaries)]
    # Borderless (rich's SIMPLE_HEAD): a sweep of two axes and six metrics fits 80 columns.
    table = Table(title=f"{scenario.name}: median over valid repetitions",
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
    for line in reason_lines(summaries):
        console.print(f"[yellow]invalid[/yellow] {line}", highlight=False)
