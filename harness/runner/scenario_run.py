"""A whole run of a scenario as one library call, `run_scenario`: the scenario loaded (or the
recorded one of a run resumed), checked before anything starts, the run directory and its
manifest and session, every pending point × repetition measured until done or stopped by a
signal, and the summary (summary.json). `wanbench run`, reproduce, the kernels' runs and a
cluster's child process all call it; how it is shown is the caller's RunDisplay."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from clients.paths import MissingBinary
from harness import interrupts, manifest
from harness.analysis import derive
from harness.analysis.numbers import metric, point_label, short_name
from harness.analysis.summary import PointSummary, document, gate
from harness.guest import record
from harness.metrics import perf
from harness.results.format import SUMMARY_FILE, ResultsFormatError
from harness.results.store import RunDir, RunDirError, write_json
from harness.runner.context import RunContext
from harness.runner.display import RunDisplay
from harness.runner.outcome import RunRequest, RunResult, Stop
from harness.runner.refusal import EXIT_REFUSED, RunRefused
from harness.runner.run import (
    LocalPoints,
    MissingTool,
    PointSource,
    TopologyKeeper,
    check_topologies,
    kernel_trace,
    pending,
    preflight,
    run_manifest,
    run_points,
    session_manifest,
)
from harness.scenario import (
    Point,
    Scenario,
    ScenarioError,
    lateness_changes,
    load,
    points,
    recorded,
)
from harness.topology import TopologyError


@dataclass
class Joined:
    """Other hosts a run measures its points on: the manifest's `cluster` block, and the
    point source for the run's context."""

    manifest: dict[str, Any]
    source: Callable[[RunContext], PointSource]


class Hosts(Protocol):
    """Machines other than this one that measure a run's points (harness.cluster.run)."""

    def join(self, scenario: Scenario,
             scenario_dir: Path) -> contextlib.AbstractContextManager[Joined]:
        """Joined for the scenario's points, left on the way out; an error naming the fix
        when they cannot measure them."""
        ...


def run_scenario(request: RunRequest, display: RunDisplay,
                 hosts: Hosts | None = None, keeper: TopologyKeeper | None = None) -> RunResult:
    """Runs (or resumes) the scenario, here or on hosts; RunRefused before anything is
    measured when it cannot. A stop signal ends it early with its points kept (the result's
    stop); the signal handlers in place before are back in place after. A run here takes
    its topologies from keeper when given (which outlives the run), else brings them up."""
    try:
        scenario, scenario_dir, run_dir = load_request(request)
    except (ScenarioError, FileNotFoundError, ResultsFormatError, RunDirError) as exc:
        raise RunRefused(str(exc)) from None
    with contextlib.ExitStack() as stack:
        if run_dir is not None:
            stack.enter_context(run_dir)  # its writer's lock, released on the way out
        try:
            check_topologies(scenario, scenario_dir)
            joined = _join(hosts, stack, scenario, scenario_dir, run_dir)
            if joined is None:
                preflight(scenario)  # a cluster's workers check what they will run
            result = _run(request, display, scenario, scenario_dir, run_dir, joined, stack,
                          keeper)
        except (MissingBinary, MissingTool, RunDirError, ResultsFormatError) as exc:
            raise RunRefused(str(exc)) from None
        except TopologyError as exc:
            raise RunRefused(f"the scenario's topology (topology.file, topology.set): "
                             f"{exc}") from None
    display.outcome(result)
    return result


def _recorded_scenario(run_dir: RunDir) -> Scenario:
    """The scenario a run recorded: exactly what was run, validated when it ran."""
    manifest = run_dir.read_manifest()
    if manifest.get("scenario_dir") is None:
        raise ResultsFormatError(f"{run_dir.manifest_path}: no \"scenario_dir\": the run "
                                 f"cannot be resumed; start a new run")
    return recorded(manifest, str(run_dir.manifest_path))


def load_request(request: RunRequest) -> tuple[Scenario, Path, RunDir | None]:
    """The scenario to run, its directory, and the run directory when resuming."""
    if request.resume is not None:
        scenario = _recorded_scenario(RunDir(request.resume))  # before the run is touched
        if request.scenario is not None and load(request.scenario,
                                                 list(request.sets)) != scenario:
            raise ScenarioError(f"{request.scenario} differs from the scenario recorded in "
                                f"{request.resume / 'manifest.json'}; resume without SCENARIO "
                                f"to finish what was recorded, or start a new run")
        run_dir = RunDir.open(request.resume)
        return scenario, Path(run_dir.read_manifest()["scenario_dir"]), run_dir
    if request.scenario is None:
        raise ScenarioError("no scenario given: wanbench run SCENARIO.yaml "
                            "(or --resume RUN_DIR)")
    return (load(request.scenario, list(request.sets)), request.scenario.resolve().parent,
            None)


def _join(hosts: Hosts | None, stack: contextlib.ExitStack, scenario: Scenario,
          scenario_dir: Path, run_dir: RunDir | None) -> Joined | None:
    """The hosts joined (left with stack), or None to measure here; a resumed run goes on
    where it started, on one machine or across a cluster."""
    recorded = run_dir.read_manifest().get("cluster") if run_dir else None
    if run_dir is not None and bool(recorded) != bool(hosts):
        raise RunRefused(f"{run_dir.path} was run " + (
            f"across the cluster of {recorded['scheduler']}: resume it with --cluster "
            f"tls://HOST:PORT" if recorded else "on one machine: resume it without --cluster"))
    return None if hosts is None else stack.enter_context(hosts.join(scenario, scenario_dir))


def _run(request: RunRequest, display: RunDisplay, scenario: Scenario, scenario_dir: Path,
         run_dir: RunDir | None, joined: Joined | None,
         stack: contextlib.ExitStack, keeper: TopologyKeeper | None) -> RunResult:
    counters, reason = perf.hardware_counters()
    machine = manifest.collect()
    resumed = run_dir is not None
    if run_dir is None:
        run_dir = stack.enter_context(
            RunDir.create(request.out, scenario.name, machine["kernel"]["release"]))
    ctx = RunContext(scenario=scenario, scenario_dir=scenario_dir, run_dir=run_dir,
                     run_id=run_dir.run_id, tsc_hz=machine["cpu"]["tsc_hz"],
                     hardware_counters=counters, backend=request.backend,
                     on_event=display.info, guest=record.current(),
                     cluster=joined.manifest if joined else {})
    source = LocalPoints(ctx, keeper) if joined is None else joined.source(ctx)
    if joined is not None:
        ctx.topology_manifest.update(file=scenario.topology.file, backend="cluster")
    _tell_what_is_measured(display, scenario, counters, reason)
    todo = pending(scenario, run_dir.finished())
    total = len(todo) + len(run_dir.finished())
    display.info(f"run {run_dir.path}: {len(todo)} of {total} point × repetition to measure")
    session = session_manifest(ctx, machine, reason)
    if resumed:
        run_dir.begin_resumption(session)
    else:
        run_dir.begin_run(run_manifest(ctx), session)
    stop = _measure(ctx, todo, display, source)
    run_dir.save_session()
    return _conclude(run_dir, scenario, total, stop, request.allow_invalid)


def _tell_what_is_measured(display: RunDisplay, scenario: Scenario, counters: bool,
                           reason: str) -> None:
    if not counters:
        display.info(f"no hardware counters: {reason}; cycles are estimated from CPU time × "
                     f"TSC frequency and labelled cycles_estimated")
    trace = kernel_trace(scenario)
    if trace is not None and not trace.tracepoints:
        display.warning(f"kernel_trace cannot run here: {trace.detail}; the kernel_* columns "
                        f"are null")
    elif trace is not None:
        display.info(f"kernel_trace: {trace.function_grain()}")


def _measure(ctx: RunContext, todo: list[tuple[Point, int]], display: RunDisplay,
             source: PointSource) -> Stop | None:
    """Measures the points; why it stopped early, or None."""
    with display.progress(len(todo)) as advance:
        def measured(point: Point, rep: int, row: dict[str, Any]) -> None:
            display.info(point_line(point, rep, row))
            advance()

        return until_stopped(lambda: run_points(ctx, todo, measured, source))


def point_line(point: Point, rep: int, row: dict[str, Any]) -> str:
    """A recorded point × repetition as its log line: its rate, and whether it is valid."""
    shown = next((f"{metric(m, row[m])} {short_name(m)}" for m in
                  ("reply_rate_rps", "stream_throughput_mbps") if row.get(m) is not None), "")
    invalid = "" if row.get("valid") else " (invalid: the reason follows the table)"
    return f"{point_label(point.sweep_values)} rep {rep}: {shown}{invalid}"


def until_stopped(work: Callable[[], Coroutine[Any, Any, None]]) -> Stop | None:
    """Runs work in an event loop that a stop signal cancels (a second one does not cut the
    teardown short); why it stopped early (a signal, a refused topology), or None. The
    handlers in place before are restored after (asyncio leaves the defaults)."""
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
        interrupts.raise_if_heard()  # a signal before these handlers whose Interrupted was lost
        await work()

    previous = {sig: signal.getsignal(sig) for sig in interrupts.STOP_SIGNALS}
    try:
        asyncio.run(main_task())
    except interrupts.Interrupted as exc:  # raised while a topology was coming up
        return Stop(exc.reason, exc.exit_status, exc.signum)
    except (asyncio.CancelledError, KeyboardInterrupt):
        stopped = interrupts.Interrupted(received[0] if received else signal.SIGINT)
        return Stop(stopped.reason, stopped.exit_status, stopped.signum)
    except TopologyError as exc:
        # e.g. calibration out of tolerance: measuring on a wrong link would mislead.
        return Stop(f"topology refused: {exc}", EXIT_REFUSED)
    finally:
        for sig, handler in previous.items():
            if handler is not None:  # None: not installed from Python
                signal.signal(sig, handler)
    return None


def _conclude(run_dir: RunDir, scenario: Scenario, total: int, stop: Stop | None,
              allow_invalid: bool) -> RunResult:
    """The run's result, its summary.json written."""
    summaries = summaries_of(run_dir, scenario)
    status = stop.status if stop else gate(summaries, allow_invalid).status
    write_summary(run_dir, summaries, status)
    return RunResult(status, run_dir.path, scenario.name, total, len(run_dir.finished()),
                     summaries, stop, lateness_changes(scenario))


def write_summary(run_dir: RunDir, summaries: list[PointSummary], status: int) -> None:
    """The run's summary.json (docs/results-format.md)."""
    write_json(run_dir.path / SUMMARY_FILE, document(run_dir.read_manifest(), summaries, status))


def summaries_of(run_dir: RunDir, scenario: Scenario) -> list[PointSummary]:
    """The run's points as its summary: per point, in the sweep's order."""
    import pandas as pd  # only here: validation errors should come back fast

    from harness.analysis.summary import summarise

    path = run_dir.path / "points.parquet"
    if not path.is_file():
        return []
    axes = run_dir.read_manifest()["sweep_axes"]
    return summarise(derive.add_derived(pd.read_parquet(path)), axes,
                     [p.point_id for p in points(scenario)], scenario.thresholds)
