"""One point × repetition launched and measured on this machine: topology endpoints in, a
Measurement out. Its server side (harness.runner.server_side) and load side
(harness.runner.load_side) are the ones a cluster point runs on its hosts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clients import validity
from harness.runner.context import Endpoints, RunContext
from harness.runner.load_side import LoadSide, cold_spec, hot_spec, seed_of
from harness.runner.processes import Children
from harness.runner.server_side import ServerSide
from harness.runner.window import Edges, Window
from harness.scenario import Point

# a fresh build's worth of dirty pages is said; a point's own logs are not
LOGGED_WRITE_OUT_MIB = 64


@dataclass
class Measurement:
    """What one point × repetition measured, before anything is judged."""

    document: dict[str, Any]  # the hot (or stream) generator's result (clients/SCHEMA.md)
    facts: validity.Facts  # what the load reported, per host, for the recorder to judge
    cold: dict[str, Any] | None  # the cold generator's last document; None without cold load
    interval: Window  # the runner's window, on the run's host's CLOCK_MONOTONIC
    edges: dict[str, Edges]  # what each source measured over, on the same clock
    window: dict[str, Any]  # the samplers' points columns over the window
    stats_before: dict[str, Any] | None  # wb-server's stats at the window's edges (else None)
    stats_after: dict[str, Any] | None
    samples: list[dict[str, Any]]  # the samplers' per-second rows
    profile_rows: list[dict[str, Any]]  # perf record's, when the scenario profiles


class PointLauncher:
    """Starts and checks what one point × repetition needs (server, cold and hot generators,
    samplers) and measures it; every process it starts is stopped on the way out."""

    def __init__(self, ctx: RunContext, ends: Endpoints, point: Point, repetition: int,
                 attempt: int = 0):
        self.ctx, self.ends = ctx, ends
        self.config = point.config
        self.seed = seed_of(point, repetition)
        self.raw = ctx.raw_dir(point, repetition, attempt)
        self.children = Children(self.raw)

    async def run(self) -> Measurement:
        ends = self.ends
        server = ServerSide(self.config, self.children, ends.prefix(ends.server_host),
                            ends.address(ends.server_host), ends.shared_host)
        try:
            return await self._measure(server)
        finally:
            await server.stop()

    async def _measure(self, server: ServerSide) -> Measurement:
        cfg, ends = self.config, self.ends
        target = await server.start()
        if server.unwritten_mib >= LOGGED_WRITE_OUT_MIB:
            self.ctx.on_event(f"wrote {server.unwritten_mib:,.0f} MiB of dirty pages out before "
                              f"measuring (writeback in the window runs on the measured CPUs)")
        cold = cold_spec(cfg, self.seed, target, ends.sources(ends.cold_host),
                         self.raw / "cold.json")
        cold_load = LoadSide(self.children, ends.prefix(ends.cold_host),
                             ends.netns(ends.cold_host))
        cold_proc = await cold_load.start_cold(cold) if cold else None
        if cold:
            await server.confirm_held(cold.cold_conns)
            self.ctx.on_event(f"{cold.cold_conns} cold connections established")
        server.hold_to_budget()
        await server.ready_samplers(tsc_hz=self.ctx.tsc_hz,
                                    hardware_counters=self.ctx.hardware_counters,
                                    emulator_pids=ends.handle.emulator_pids())
        spec = hot_spec(cfg, self.seed, target, ends.sources(ends.hot_host),
                        self.raw / "hot.json")
        hot_load = LoadSide(self.children, ends.prefix(ends.hot_host),
                            ends.netns(ends.hot_host))
        window = Window.after(cfg.warmup_s, cfg.duration_s)
        hot = await hot_load.start_hot(spec, window)
        measured = await server.measure(
            window, generator_pids=[p.pid for p in (hot.proc, cold_proc) if p is not None])
        document, counted = await hot_load.hot_document(hot)
        cold_doc = await cold_load.stop_cold(cold_proc, cold)
        edges = dict(measured.edges)
        if counted is not None:
            edges["generator"] = counted
        return Measurement(document, validity.Facts.of_document(document, hot.spec), cold_doc,
                           window, edges, measured.window, measured.stats_before,
                           measured.stats_after, measured.samples, measured.profile_rows)
