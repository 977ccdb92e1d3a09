"""One point × repetition launched and measured on this machine: topology endpoints in, a
Measurement out. Its server side (harness.runner.server_side) and load side
(harness.runner.load_side) are the ones a cluster point runs on its hosts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clients import validity
from harness.runner.context import Endpoints, RunContext
from harness.runner.held import HeldServer, HoldKey, ServerWithCold
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
    cold_held: int | None  # cold connections held at the end; None without cold load
    interval: Window  # the runner's window, on the run's host's CLOCK_MONOTONIC
    edges: dict[str, Edges]  # what each source measured over, on the same clock
    window: dict[str, Any]  # the samplers' points columns over the window
    stats_before: dict[str, Any] | None  # wb-server's stats at the window's edges (else None)
    stats_after: dict[str, Any] | None
    samples: list[dict[str, Any]]  # the samplers' per-second rows
    profile_rows: list[dict[str, Any]]  # perf record's, when the scenario profiles
    # the server and cold connections were the previous point's (harness.runner.held)
    carried_over: bool = False


class PointLauncher:
    """Starts and checks what one point × repetition needs (server, cold and hot generators,
    samplers) and measures it; its hot generator is stopped on the way out, and its server
    and cold generator too unless they are kept for the next point."""

    def __init__(self, ctx: RunContext, ends: Endpoints, point: Point, repetition: int,
                 attempt: int = 0):
        self.ctx, self.ends = ctx, ends
        self.config = point.config
        self.seed = seed_of(point, repetition)
        self.raw = ctx.raw_dir(point, repetition, attempt)
        self.children = Children(self.raw)  # the hot generator's

    async def run(self, held: HeldServer, key: HoldKey | None) -> Measurement:
        """The point measured on the server and cold connections held for key (checked
        again), or on ones it starts. These are kept in held for the next point when key is
        given (hold_key), else stopped; and stopped whenever the point fails, so that the
        next point starts afresh."""
        carried = held.take(key)
        up = carried or self._server_with_cold()
        try:
            try:
                if carried is None:
                    await self._start(up)
                else:
                    self.ctx.on_event("server and cold connections carried over from the "
                                      "previous point")
                    await up.server.write_out()
                measured = await self._measure(up, kept=key is not None)
            finally:
                await self.children.stop_all()  # the hot generator before the server it loads
        except BaseException:
            await up.stop()
            raise
        measured.carried_over = carried is not None
        if key is None:
            await up.stop()
        else:
            held.keep(key, up)
        return measured

    def _server_with_cold(self) -> ServerWithCold:
        ends, children = self.ends, Children(self.raw)
        return ServerWithCold(
            ServerSide(self.config, children, ends.prefix(ends.server_host),
                       ends.address(ends.server_host), ends.shared_host),
            LoadSide(children, ends.prefix(ends.cold_host), ends.netns(ends.cold_host)))

    async def _start(self, up: ServerWithCold) -> None:
        """The server started, then the cold generator once it says its connections are
        established."""
        ends = self.ends
        up.target = await up.server.start()
        up.cold_spec = cold_spec(self.config, self.seed, up.target, ends.sources(ends.cold_host),
                                 self.raw / "cold.json")
        if up.cold_spec:
            up.cold_proc = await up.cold_load.start_cold(up.cold_spec)

    async def _measure(self, up: ServerWithCold, kept: bool) -> Measurement:
        cfg, ends, server = self.config, self.ends, up.server
        if server.unwritten_mib >= LOGGED_WRITE_OUT_MIB:
            self.ctx.on_event(f"wrote {server.unwritten_mib:,.0f} MiB of dirty pages out before "
                              f"measuring (writeback in the window runs on the measured CPUs)")
        if up.cold_spec:
            await server.confirm_held(up.cold_spec.cold_conns)
            self.ctx.on_event(f"{up.cold_spec.cold_conns} cold connections held")
        server.hold_to_budget()
        await server.ready_samplers(workdir=self.raw, tsc_hz=self.ctx.tsc_hz,
                                    hardware_counters=self.ctx.hardware_counters,
                                    emulator_pids=ends.handle.emulator_pids())
        spec = hot_spec(cfg, self.seed, up.target, ends.sources(ends.hot_host),
                        self.raw / "hot.json")
        hot_load = LoadSide(self.children, ends.prefix(ends.hot_host),
                            ends.netns(ends.hot_host))
        window = Window.after(cfg.warmup_s, cfg.duration_s)
        hot = await hot_load.start_hot(spec, window)
        measured = await server.measure(
            window, generator_pids=[p.pid for p in (hot.proc, up.cold_proc) if p is not None])
        document, counted = await hot_load.hot_document(hot)
        edges = dict(measured.edges)
        if counted is not None:
            edges["generator"] = counted
        return Measurement(document, validity.Facts.of_one(hot.spec.facts(document)),
                           await up.cold_held(kept), window, edges, measured.window,
                           measured.stats_before, measured.stats_after, measured.samples,
                           measured.profile_rows)
