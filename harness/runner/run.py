"""Runs a scenario: preflight, manifest, the order of its points, their topologies, and for
each point × repetition a launcher that measures and a recorder that keeps the record."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from clients import pinning
from clients.drivers.common import INSTALL_FIX
from clients.paths import binary
from harness import interrupts, topology
from harness.analysis.numbers import point_label
from harness.metrics import ktrace
from harness.results.format import SCHEMA_VERSION
from harness.results.store import STORAGE_FIXES, RunDir
from harness.runner import quiet
from harness.runner.context import Endpoints, RunContext, endpoints
from harness.runner.held import HeldServer, hold_key
from harness.runner.launch import Measurement, PointLauncher
from harness.runner.processes import PointFailed
from harness.runner.record import PointRecorder
from harness.scenario import (
    Cpus,
    Point,
    Scenario,
    WbServer,
    lateness_changes,
    points,
    sweep_columns,
)
from harness.topology.addressing import check_plan
from harness.topology.cgroups import CgroupError, cpu_hierarchy


class MissingTool(RuntimeError):
    """A program the scenario needs is not installed; the message names the fix."""




def preflight(scenario: Scenario) -> None:
    """Refuse before anything starts when a binary or tool of some point is missing."""
    for point in points(scenario):
        cfg = point.config
        if isinstance(cfg.server, WbServer):
            binary("wb-server")
        elif shutil.which(cfg.server.command[0]) is None:
            raise MissingTool(f"server command {cfg.server.command[0]!r} is not on PATH")
        if cfg.cold.conns or cfg.stream or cfg.hot.generator == "sclient":
            binary("wb-sclient")
        tool = cfg.hot.generator
        if tool in INSTALL_FIX and shutil.which(tool) is None:
            raise MissingTool(f"hot.generator {tool} is not on PATH; fix: {INSTALL_FIX[tool]}"
                              f", or use hot.generator: sclient")
        if cfg.cpus.server_budget_pct:
            try:
                cpu_hierarchy()
            except CgroupError as exc:
                raise MissingTool(f"cpus.server_budget_pct: {exc}") from None


def check_topologies(scenario: Scenario, scenario_dir: Path) -> None:
    """Every topology the points use loads and its addresses plan: TopologyError naming the
    field before anything starts (each is brought up only when its points run)."""
    for ref in {point.topology_key: point.config.topology for point in points(scenario)}.values():
        check_plan(topology.load_topology(ref.path(scenario_dir), dict(ref.set) or None))


def kernel_trace(scenario: Scenario) -> ktrace.Support | None:
    """What this machine allows for a scenario whose points ask for kernel_trace; None when
    none asks."""
    if not any(point.config.kernel_trace for point in points(scenario)):
        return None
    return ktrace.support()


def run_manifest(ctx: RunContext) -> dict[str, Any]:
    """What the run is: written when it is created, never rewritten."""
    scenario = ctx.scenario
    grid = points(scenario)
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": ctx.run_id,
        "scenario_name": scenario.name,
        "scenario": scenario.model_dump(mode="json", by_alias=True),
        "scenario_dir": str(ctx.scenario_dir),
        "sweep_axes": sweep_columns(scenario),
        "parameters": list(grid[0].columns),
        "repetitions": scenario.repetitions,
        "points": len(grid),
        "lateness_changed": lateness_changes(scenario),
    }


def session_manifest(ctx: RunContext, machine: dict[str, Any], reason: str) -> dict[str, Any]:
    """Where and how this session (the run's start, or one resumption of it) measured: the
    machine as it was, the topologies it brought up and its cluster (both filled in as it
    goes: the same dicts as ctx's)."""
    return {
        **machine,
        "perf": {"hardware_counters": ctx.hardware_counters, "reason": reason,
                 "cycles_source": "perf stat -C <server cpu>" if ctx.hardware_counters
                 else "estimated: server CPU busy time × TSC frequency"},
        "kernel_trace": dataclasses.asdict(trace) if (trace := kernel_trace(ctx.scenario))
        else None,
        "topology": ctx.topology_manifest,
        "guest": ctx.guest.model_dump(mode="json") if ctx.guest else None,
        "cluster": ctx.cluster or None,
    }


class TopologyKeeper:
    """Brings a topology up and keeps it until another one is asked for or it is closed: one
    at a time, as an idle topology's emulators would share the CPUs with the next one's
    points. A run has its own, closed with the run. `reproduce --quick` keeps one across its
    scenarios' runs: consecutive scenarios on one topology bring it up and calibrate it once,
    and each run's manifest names the run that did (`brought_up_by_run`); the emulators'
    counters, read at teardown, are then in no run's manifest."""

    def __init__(self) -> None:
        self.key: str | None = None
        self.handle: Any = None
        self.brought_up_by: str | None = None
        self.stack = contextlib.ExitStack()

    def get(self, key: str, topo: Any, backend: str, run_id: str) -> tuple[Any, bool]:
        """The topology's handle, and whether it was brought up for this call."""
        if key == self.key and self.handle is not None:
            return self.handle, False
        self.close()
        with interrupts.raising():  # calibration blocks: a signal must not wait for it
            self.handle = self.stack.enter_context(topology.bring_up(
                topo, backend=backend, run_prefix=None, handle_signals=False))
        self.key, self.brought_up_by = key, run_id
        return self.handle, True

    def close(self) -> None:
        """Tears the topology down (its emulators' counters are then in its handle)."""
        self.stack.close()
        self.stack = contextlib.ExitStack()
        self.key = self.handle = None


class TopologyCache:
    """The run's topology while consecutive points share it (same file and overrides), from
    the keeper the run was given or from its own.

    Each topology the run used is one entry of the manifest's `topology.instances`,
    rewritten when the run leaves it: after teardown, with the emulator's counters, when the
    keeper is the run's own."""

    def __init__(self, ctx: RunContext, keeper: TopologyKeeper | None = None):
        self.ctx = ctx
        self.own = keeper is None
        self.keeper = keeper or TopologyKeeper()
        self.key: str | None = None
        self.ends: Endpoints | None = None

    def get(self, point: Point) -> Endpoints:
        if point.topology_key == self.key and self.ends is not None:
            return self.ends
        self.close()
        ref = point.config.topology
        path = ref.path(self.ctx.scenario_dir)
        topo = topology.load_topology(path, dict(ref.set) or None)
        backend = self.ctx.backend or ref.backend
        handle, fresh = self.keeper.get(json.dumps([str(path), point.topology_key, backend]),
                                        topo, backend, self.ctx.run_id)
        self.ctx.on_event(f"topology {ref.file} " + (
            "up" if fresh else f"kept up from run {self.keeper.brought_up_by}")
            + f" (backend {handle.backend})")
        _place_network(handle, point.config.cpus)
        self.key = point.topology_key
        self.ends = endpoints(handle)
        self.ctx.topology_manifest.update(file=ref.file, backend=handle.backend,
                                          probe=handle.probe)
        self.ctx.topology_manifest.setdefault("instances", []).append(self._describe())
        self.ctx.run_dir.save_session()  # kept even if this session is killed
        return self.ends

    def _describe(self) -> dict[str, Any]:
        assert self.ends is not None
        return {"set": json.loads(self.key or "{}").get("set", {}),
                **self.ends.handle.manifest(), "brought_up_by_run": self.keeper.brought_up_by}

    def close(self) -> None:
        if self.own:
            self.keeper.close()
        if self.ends is not None:
            self.ctx.topology_manifest["instances"][-1] = self._describe()
        self.key = self.ends = None


def _place_network(handle: Any, cpus: Cpus) -> None:
    """The network's work off the server's CPU, which the interference check holds to the
    server alone: the link emulators beside the generator, and each host that asks for its
    own receive processing on its own CPU (a server's on the server's)."""
    handle.steer_receive({host: cpus.server if spec.role == "server" else cpus.generator
                          for host, spec in handle.topology.hosts.items()})
    for pid in handle.emulator_pids():
        pinning.pin_running(pid, pinning.all_but(cpus.server) or {cpus.generator})


def _in_round(round_: list[Point], hold: bool) -> Callable[[Point], tuple[str, int]]:
    """The sort key of a round in order: points sharing a topology stay together (one
    bring-up each per round); held across hot loads, so do those sharing a server, in the
    sweep's order (a stable sort keeps it within each group)."""
    first: dict[str, int] = {}
    for point in round_:
        first.setdefault(point.server_key, point.index)
    return lambda point: (point.topology_key, first[point.server_key] if hold else 0)


def pending(scenario: Scenario, done: set[str]) -> list[tuple[Point, int]]:
    """The point × repetitions still to measure, in the scenario's order (scenario.order)."""
    grid = points(scenario)
    if scenario.order == "grouped":
        todo = [(point, rep) for point in grid for rep in range(scenario.repetitions)]
    else:
        todo = []
        for rep in range(scenario.repetitions):
            round_ = list(grid)
            if scenario.order == "shuffled":
                random.Random(f"{scenario.order_seed}/{rep}").shuffle(round_)
            else:
                round_.sort(key=_in_round(round_, scenario.hold_server_across_hot))
            todo += [(point, rep) for point in round_]
    return [(point, rep) for point, rep in todo
            if RunDir.record_name(point.point_id, rep) not in done]


class PointSource(Protocol):
    """Where a run's points are measured: here (LocalPoints) or across a cluster's hosts
    (harness.cluster.session.ClusterPoints)."""

    async def measure(self, point: Point, repetition: int, attempt: int) -> Measurement: ...

    async def close(self) -> None: ...


class LocalPoints:
    """On this machine, in the topologies brought up here, on servers held across points
    that differ only in their hot load when the scenario says so (harness.runner.held)."""

    def __init__(self, ctx: RunContext, keeper: TopologyKeeper | None = None):
        self.ctx = ctx
        self.cache = TopologyCache(ctx, keeper)
        self.held = HeldServer()

    async def measure(self, point: Point, repetition: int, attempt: int) -> Measurement:
        key = hold_key(self.ctx.scenario, point, repetition)
        await self.held.release_unless(key)  # before its topology may be taken down
        return await PointLauncher(self.ctx, self.cache.get(point), point, repetition,
                                   attempt).run(self.held, key)

    async def close(self) -> None:
        try:
            await self.held.release()
        finally:
            self.cache.close()


async def measure_point(ctx: RunContext, source: PointSource, point: Point, repetition: int,
                        attempt: int) -> dict[str, Any]:
    """One point × repetition's record: launched and measured, then recorded; a point that
    could not be measured is recorded as failed, with why."""
    recorder = PointRecorder(ctx, point, repetition, attempt)
    try:
        measured = await source.measure(point, repetition, attempt)
    except PointFailed as exc:
        ctx.on_event(f"{point_label(point.sweep_values)} rep {repetition} failed: {exc}")
        return recorder.failed(exc.reason, exc.lost_host)
    return recorder.record(measured)


async def run_points(ctx: RunContext, todo: list[tuple[Point, int]],
                     progress: Callable[[Point, int, dict[str, Any]], None],
                     source: PointSource) -> None:
    """Measure each pending point × repetition from source (here or across a cluster); each
    record is on disk before the next starts."""
    try:
        for point, rep in todo:
            for attempt in range(ctx.scenario.interference_retries + 1):
                await quiet.before_point(ctx, point)
                record = await measure_point(ctx, source, point, rep, attempt)
                if not record["point"].get("interference_only"):
                    break
                ctx.run_dir.write_attempt(point.point_id, rep, attempt, record)
                if attempt < ctx.scenario.interference_retries:  # the last one's follows
                    ctx.on_event(f"{point_label(point.sweep_values)} rep {rep} attempt "
                                 f"{attempt}: {record['point']['invalid_reason']}; measuring "
                                 f"it again")
            ctx.run_dir.write_record(point.point_id, rep, record)
            ctx.run_dir.rebuild_tables()
            ctx.run_dir.save_session()
            progress(point, rep, record["point"])
    except OSError as exc:
        if exc.errno not in STORAGE_FIXES:
            raise
        raise ctx.run_dir.unwritable(exc) from None  # a raw log, while measuring
    finally:
        await source.close()
