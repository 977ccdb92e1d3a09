"""One measured window: per-second samples plus window totals for the point record."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clients import pinning
from harness.metrics import cpu, ktrace, net, perf, profile, whoran
from harness.metrics.interference import Interference
from harness.metrics.perfctl import ControlledPerf
from harness.monotonic import sleep_until


@dataclass
class SamplerConfig:
    server_pid: int
    server_cpu: int
    workdir: Path
    tsc_hz: float | None = None
    hardware_counters: bool = False
    profile: bool = False
    interval_s: float = 1.0
    generator_cpu: int | None = None
    # the topology's link emulators (wb-linkem): their CPU is the WAN's cost on this machine
    emulator_pids: list[int] = field(default_factory=list)
    proc_stat: Path = cpu.PROC_STAT  # tests feed a file with made-up steal
    kernel_trace: bool = False  # wb-ktrace over the window (the kernel_* columns)
    late_us: float | None = None  # the generator's late threshold (the wait that makes sends late)
    # why no CPU (the generator's, the server's) may be traced here, as the caller knows it (an
    # emulated CPU)
    who_ran_refused: str | None = None
    # the server's own counters (wb-server's, each reading with its monotonic_ns), read first
    # at each edge: the cheapest source, so the closest to it
    server_counters: Callable[[], dict[str, Any] | None] | None = None


@dataclass
class _Reading:
    t_ns: int  # CLOCK_MONOTONIC, the clock of the point's window
    server_cpu_s: tuple[float, float]  # user, system: 10 ms ticks
    server_ran_s: float  # on a CPU, to the nanosecond (schedstat)
    generator_cpu_s: tuple[float, float]
    emulator_ran_s: float | None  # None: no emulator (loopback, veth, netem)
    cpu: cpu.CpuTimes
    net: dict[str, int] | None


class WindowSampler:
    """Reads /proc once a second (cheap: a few small files), perf and wb-ktrace run beside it
    when asked, and wb-whoran on the generator's CPU and on the server's where it can
    (whoran: one tracer per CPU). This
    process (the run's Python: these samplers, the progress display) is not pinned: pinned to
    the server's CPU it stretched the server's traced in-kernel time; on the generator's CPU
    the trace counts it among the others (docs/validity.md).

    prepare_server() before the window is decided (perf's and the server's tracers' start-up,
    however long it takes), prepare() once the generators run (their CPU's tracer, within the
    warm-up), start() at the window's start, stop() at its end; close() whatever happened.
    `edges`: the CLOCK_MONOTONIC instants each source of this sampler read at, by the source's
    name (harness.results.format.WINDOW_SOURCES), once stopped; `server_stats`: the server's
    counters at both edges (None without them)."""

    def __init__(self, config: SamplerConfig):
        self.config = config
        self.timeseries: list[dict[str, Any]] = []
        self.edges: dict[str, tuple[int, int]] = {}
        self.server_stats: tuple[dict[str, Any] | None, dict[str, Any] | None] = (None, None)
        self._task: asyncio.Task[None] | None = None
        self._first: _Reading | None = None
        self._perf: list[tuple[ControlledPerf, Path]] = []
        self._ktrace: ktrace.KernelTrace | None = None
        self._server_prepared = False
        self._server_who_ran = whoran.TracedCpu(whoran.SERVER, [config.server_pid],
                                                config.server_cpu, config.workdir,
                                                refused=config.who_ran_refused)
        self._who_ran = (self._server_who_ran,)  # the generator's joins it in prepare()
        self._server_cpu = cpu.TreeCpu([config.server_pid])
        self._server_ran = cpu.TreeSchedstat(config.server_pid)
        self._generator_cpu = cpu.TreeCpu([])
        self._emulator_ran = (cpu.TreeSchedstat(*config.emulator_pids)
                              if config.emulator_pids else None)
        self._interference: Interference | None = None

    def _read(self) -> _Reading:
        c = self.config
        try:
            counters = net.net_counters(c.server_pid)
        except OSError:
            counters = None
        return _Reading(
            t_ns=time.monotonic_ns(),
            server_cpu_s=self._server_cpu.read(),
            server_ran_s=self._server_ran.read()[0],
            generator_cpu_s=self._generator_cpu.read(),
            emulator_ran_s=self._emulator_ran.read()[0] if self._emulator_ran else None,
            cpu=cpu.cpu_times(c.server_cpu, c.proc_stat),
            net=counters,
        )

    async def prepare_server(self) -> None:
        """Starts the perfs and wb-ktrace asked for on the server, counting nothing yet
        (PerfFailed or KernelTraceFailed if one cannot). The runner decides the window after
        this returns: what it measures is loaded before it starts, however long loading takes
        on a loaded machine."""
        c = self.config
        c.workdir.mkdir(parents=True, exist_ok=True)
        # never on the server's CPU (unless it is the only one)
        beside = pinning.all_but(c.server_cpu) or {c.server_cpu}
        if c.hardware_counters:
            out = c.workdir / "perf-stat.txt"
            self._perf.append((ControlledPerf("stat", perf.stat_argv(c.server_cpu, out), beside,
                                              c.workdir), out))
        if c.profile:
            out = c.workdir / "perf.data"
            argv = profile.record_argv(c.server_cpu, out, c.hardware_counters)
            self._perf.append((ControlledPerf("record", argv, beside, c.workdir), out))
        for controlled, _ in self._perf:
            await controlled.start()
        if c.kernel_trace:
            self._ktrace = ktrace.KernelTrace.of_server(c.server_pid, c.server_cpu, c.workdir)
            await self._ktrace.prepare()
        await self._server_who_ran.prepare(None)
        self._server_prepared = True

    async def prepare(self, window_start_ns: int | None = None,
                      generator_pids: tuple[int, ...] = ()) -> None:
        """The generators on this host (generator_pids) watched, the server prepared if it was
        not. wb-whoran on the generator's CPU, a measure of interference only, gets
        until window_start_ns (CLOCK_MONOTONIC) to be ready: the window does not wait for it
        (the generator, told the window as it started, is already in its warm-up)."""
        c = self.config
        if not self._server_prepared:
            await self.prepare_server()
        pids = list(generator_pids)
        self._generator_cpu = cpu.TreeCpu(pids)
        self._interference = Interference(c.server_pid, c.server_cpu, pids, c.generator_cpu,
                                          c.proc_stat)
        # the run's link emulators beside the generator are its set-up, not others: a
        # generator kept waiting by them is not measured again (on the server's CPU they
        # stay others, crowded_server, as any task the measured server waited behind)
        generator_who_ran = whoran.TracedCpu(whoran.GENERATOR, pids, c.generator_cpu,
                                             c.workdir, c.late_us, c.who_ran_refused,
                                             c.emulator_pids)
        self._who_ran = (generator_who_ran, self._server_who_ran)
        left = (None if window_start_ns is None
                else max(0, window_start_ns - time.monotonic_ns()) / 1e9)
        await generator_who_ran.prepare(left)

    async def start(self, at_ns: int | None = None) -> None:
        """The window starts at at_ns (CLOCK_MONOTONIC; None: now). The tracers are
        told the instant ahead and switch counting on at it themselves; /proc is read at it
        (then once a second), and perf counts from just after."""
        interference = self._interference
        assert interference is not None, "prepare() first"
        tracers = asyncio.gather(*(tracer.start(at_ns) for tracer in self._tracers()))
        try:
            if at_ns is not None:
                await sleep_until(at_ns)
            self.server_stats = (self._server_counters(), None)
            self._first = self._read()
            interference.start()
            for controlled, _ in self._perf:
                await controlled.enable()
        finally:
            await tracers
        self._task = asyncio.create_task(self._loop(self._first))

    def _server_counters(self) -> dict[str, Any] | None:
        read = self.config.server_counters
        return read() if read is not None else None

    def _tracers(self) -> list[ktrace.KernelTrace | whoran.TracedCpu]:
        return [*([self._ktrace] if self._ktrace is not None else []), *self._who_ran]

    async def _loop(self, first: _Reading) -> None:
        previous = first
        while True:
            await asyncio.sleep(self.config.interval_s)
            current = self._read()
            self._sample(first, previous, current)
            previous = current

    def _sample(self, first: _Reading, before: _Reading, after: _Reading) -> None:
        t_s = round((after.t_ns - first.t_ns) / 1e9, 3)
        for source, metric, value in _interval_metrics(before, after):
            self.timeseries.append({"t_s": t_s, "source": source, "metric": metric,
                                    "value": value})

    async def stop(self, at_ns: int | None = None) -> dict[str, Any]:
        """End the window at at_ns (CLOCK_MONOTONIC; None: now): the tracers, told ahead,
        stop counting at it, /proc is read at it; returns its totals as point-record
        columns."""
        assert self._first is not None and self._task is not None, "start() first"
        assert self._interference is not None
        stopping = [asyncio.ensure_future(traced.stop(at_ns)) for traced in self._who_ran]
        traced_calls = (asyncio.ensure_future(self._ktrace.stop(at_ns))
                        if self._ktrace is not None else None)
        try:
            if at_ns is not None:
                await sleep_until(at_ns)
            self.server_stats = (self.server_stats[0], self._server_counters())
            last = self._read()
        finally:
            traced = await traced_calls if traced_calls is not None else None
            generator_cpu, server_cpu = [await seen for seen in stopping]
        interference = self._interference.stop((last.t_ns - self._first.t_ns) / 1e9,
                                               generator_cpu, server_cpu)
        self._task.cancel()
        await self.close()
        self.edges["sampler"] = (self._first.t_ns, last.t_ns)
        before, after = self.server_stats
        if before is not None and after is not None:
            self.edges["server_stats"] = (before["monotonic_ns"], after["monotonic_ns"])
        # wb-ktrace's and each wb-whoran's edges: the window each says it counted over
        if traced is not None:
            counted = ktrace.WindowEdges.of(traced)
            self.edges["kernel_trace"] = (counted.start_ns, counted.end_ns)
        for seen in (generator_cpu, server_cpu):
            if seen.who_ran is not None:
                counted = seen.who_ran.edges
                self.edges[f"who_ran_{seen.who_ran.role}"] = (counted.start_ns, counted.end_ns)
        return {**self._totals(self._first, last), **interference,
                **ktrace.columns(traced, self.config.server_cpu)}

    async def close(self) -> None:
        """No perf or tracer left running (after stop(), or when the point failed before
        it)."""
        for controlled, _ in self._perf:
            await controlled.stop()
        if self._ktrace is not None:
            await self._ktrace.close()
        for traced in self._who_ran:
            await traced.close()

    def profile_rows(self) -> list[dict[str, Any]]:
        return [row for controlled, out in self._perf if controlled.name == "record"
                for row in profile.report(out)]

    def _totals(self, first: _Reading, last: _Reading) -> dict[str, Any]:
        c = self.config
        window = {f"{source}_{metric}": value for source, metric, value in
                  _interval_metrics(first, last)}
        totals: dict[str, Any] = {
            "cpu_server_pct": window["server_proc_cpu_pct"],
            "cpu_server_user_pct": window["server_proc_user_pct"],
            "cpu_server_sys_pct": window["server_proc_sys_pct"],
            "cpu_generator_pct": window["generator_cpu_pct"],
            "cpu_emulator_pct": window.get("emulator_cpu_pct"),
            "cpu_idle_pct": window["server_cpu_idle_pct"],
            "cpu_softirq_pct": window["server_cpu_softirq_pct"],
            "cpu_user_pct": window["server_cpu_user_pct"],
            "cpu_system_pct": window["server_cpu_system_pct"],
            "sampled_window_s": (last.t_ns - first.t_ns) / 1e9,
        }
        if first.net is not None and last.net is not None:
            totals.update(net.delta(first.net, last.net))
        else:
            totals.update(dict.fromkeys(("packets_in", "packets_out", "bytes_in", "bytes_out")))
        stat_file = next((out for controlled, out in self._perf
                          if controlled.name == "stat"), None)
        if stat_file is not None:
            totals.update(perf.counters_from_file(stat_file))
            totals["cycles_estimated"] = False
        else:
            busy_s = cpu.busy_s_between(first.cpu, last.cpu)
            totals.update(cycles=perf.estimated_cycles(busy_s, c.tsc_hz), instructions=None,
                          cache_misses=None, cycles_estimated=True)
        packets = (totals["packets_in"] or 0) + (totals["packets_out"] or 0)
        totals["cycles_per_packet"] = (totals["cycles"] / packets
                                       if totals["cycles"] and packets else None)
        totals["instructions_per_packet"] = (totals["instructions"] / packets
                                             if totals["instructions"] and packets else None)
        return totals


def _interval_metrics(before: _Reading, after: _Reading) -> list[tuple[str, str, float | None]]:
    elapsed = (after.t_ns - before.t_ns) / 1e9
    if elapsed <= 0:
        return []
    su = after.server_cpu_s[0] - before.server_cpu_s[0]
    ss = after.server_cpu_s[1] - before.server_cpu_s[1]
    gen = sum(after.generator_cpu_s) - sum(before.generator_cpu_s)
    # the total from schedstat: at a few hundred requests a second a server runs for less
    # than the 10 ms tick that user + system count in, and read 0 %
    rows: list[tuple[str, str, float | None]] = [
        ("server_proc", "cpu_pct", 100 * (after.server_ran_s - before.server_ran_s) / elapsed),
        ("server_proc", "user_pct", 100 * su / elapsed),
        ("server_proc", "sys_pct", 100 * ss / elapsed),
        ("generator", "cpu_pct", 100 * gen / elapsed),
    ]
    if before.emulator_ran_s is not None and after.emulator_ran_s is not None:
        rows.append(("emulator", "cpu_pct",
                     100 * (after.emulator_ran_s - before.emulator_ran_s) / elapsed))
    rows += [("server_cpu", name, value) for name, value in
             cpu.cpu_percentages(before.cpu, after.cpu).items()]
    if before.net is not None and after.net is not None:
        rows += [("server_net", f"{name}_per_s", value / elapsed)
                 for name, value in net.delta(before.net, after.net).items()]
    return rows
