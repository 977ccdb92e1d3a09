"""A point's server side: the server started (wb-server or an external one) and checked to be
the one listening, its stats, its hold on the cold connections, its CPU budget, and the
samplers over the measured window. The same code runs in the run's process (one machine) or
in the server host's cluster agent (harness.cluster.agent)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clients import validity
from clients.pinning import pin_argv
from harness import procs, servers
from harness.guest import record as guest_record
from harness.metrics import ktrace, writeback
from harness.metrics.cpu import process_tree
from harness.metrics.perfctl import PerfFailed
from harness.metrics.sampler import SamplerConfig, WindowSampler
from harness.runner.processes import Children, PointFailed, read_line
from harness.runner.window import Edges, Window
from harness.scenario import ExternalServer, Scenario, WbServer
from harness.topology.cgroups import CpuBudget, Throttling


async def listeners(prefix: list[str], port: int) -> dict[int, str]:
    """PID → command name of the processes listening on TCP port (in prefix's namespace)."""
    probe = await asyncio.create_subprocess_exec(
        *prefix, "ss", "-Hltnp", f"sport = :{port}", stdout=asyncio.subprocess.PIPE)
    out, _ = await probe.communicate()
    text = out.decode(errors="replace")
    found = {int(pid): comm for comm, pid in re.findall(r'\("([^"]*)",pid=(\d+)', text)}
    if text.strip() and not found:
        found[0] = "a listener ss shows without its process"
    return found


def throttling_columns(held: Throttling, window: dict[str, Any]) -> dict[str, Any]:
    """A budgeted server's throttling over the window, as points columns. schedstat counts
    a throttled task as waiting on its run queue: that was its budget, not a neighbour, so
    it leaves server_wait_pct (measured: 30 % budget, 0.35 s waited, 0.35 s throttled)."""
    columns: dict[str, Any] = {
        "server_throttled_pct": 100 * held.throttled_periods / held.periods if held.periods
        else 0.0,
        "server_throttled_s": held.throttled_s}
    waited, span = window.get("server_wait_pct"), window.get("sampled_window_s")
    if waited is not None and span:
        columns["server_wait_pct"] = max(0.0, waited - 100 * held.throttled_s / span)
    return columns


def _who_ran_refused() -> str | None:
    """Why this process must not trace a CPU (the generator's, the server's) with who-ran, if it
    must not."""
    guest = guest_record.current()
    if guest is not None and guest.emulated:
        # its timings, waits included, are not measured there; and loading the programs
        # under TCG took longer than a short run, once with the guest stopping mid-run
        return "an emulated CPU (a guest under TCG)"
    return None


def wb_server_config(cfg: Scenario, listen: str, stats_path: Path,
                     counters_path: Path | str | None) -> servers.ServerConfig:
    """The scenario's wb-server on its CPU: for a stream, the side that reads it (--sink)
    or the one that sends it (--source), as stream.sender says."""
    server, stream = cfg.server, cfg.stream
    assert isinstance(server, WbServer), "an external server has no wb-server flags"
    return servers.ServerConfig(
        dispatch=server.dispatch, accept=server.accept, reply_bytes=server.reply_bytes,
        listen=listen, backlog=server.backlog, workers=server.workers, cpu=cfg.cpus.server,
        stats_path=stats_path, counters_path=counters_path,
        sink=stream is not None and stream.sender == "generator",
        source_mbps=stream.mbps if stream is not None and stream.sender == "server" else 0.0,
        min_wait_us=server.min_wait_us, rt_signal_queue=server.rt_signal_queue)


@dataclass
class ServerWindow:
    """What the server's host measured over the window."""

    window: dict[str, Any]  # the samplers' points columns
    stats_before: dict[str, Any] | None  # wb-server's stats at the window's edges (else None)
    stats_after: dict[str, Any] | None
    samples: list[dict[str, Any]]  # the samplers' per-second rows
    profile_rows: list[dict[str, Any]]  # perf record's, when the scenario profiles
    edges: dict[str, Edges]  # what each source here read at (server_stats, sampler, ...)


class ServerSide:
    """The server of one point × repetition, on the host whose argv prefix is `prefix` and
    whose address is `address`; stopped (and its CPU budget's group removed) by stop()."""

    def __init__(self, config: Scenario, children: Children, prefix: list[str], address: str,
                 shared_host: bool):
        self.config, self.children, self.prefix, self.address = config, children, prefix, address
        self.shared_host = shared_host  # loopback: the server takes any free port
        self.raw = children.raw
        self.server: asyncio.subprocess.Process | None = None  # unshare, the server's parent
        self.server_pid: int | None = None  # the server itself: stats, CPU, sockets
        self.stats_path = self.raw / "server-stats.json"  # its snapshot as it exits
        # read at the edges; in memory, as a guest's results directory (9p) cannot be mapped
        self.counters = servers.Counters.in_memory()
        self.unwritten_mib = 0.0  # dirty pages written out at the start (start)
        self.sampler: WindowSampler | None = None  # ready_samplers() to close()
        self._stack = contextlib.ExitStack()
        cpus = config.cpus
        # the server's cgroup, when it has a CPU budget
        self.budget: CpuBudget | None = self._stack.enter_context(
            CpuBudget(cpus.server_budget_pct, cpus.budget_period_us)) \
            if cpus.server_budget_pct else None

    async def stop(self) -> None:
        """Every process stopped, then the budget's group removed (it cannot be while they
        are in it)."""
        try:
            if self.sampler is not None:  # the point failed between ready_samplers and measure
                await self.sampler.close()
            await self.children.stop_all()
        finally:
            self.counters.close()
            self._stack.close()

    async def write_out(self) -> None:
        """This host's dirty pages written out (unwritten_mib: how many there were), so that
        writeback is not in the window: before a point, on a server started or kept for it."""
        self.unwritten_mib = await writeback.write_out()

    async def start(self) -> str:
        """The server started and checked; its ADDR:PORT. This host's dirty pages are written
        out first (write_out)."""
        cfg = self.config
        await self.write_out()
        if isinstance(cfg.server, WbServer):
            port = 0 if self.shared_host else cfg.server.port
            server = wb_server_config(cfg, f"{self.address}:{port}", self.stats_path,
                                      self.counters.path)
            self.server = await self._spawn_server(server.argv())
            assert self.server.stdout is not None
            try:
                line = await read_line(self.server.stdout, 10, "wb-server")
            except PointFailed as exc:
                raise PointFailed(f"{exc}{self._server_said()}") from None
            if not line.startswith("ready "):
                raise PointFailed(f"wb-server said {line!r} instead of 'ready ADDR:PORT'")
            target = line.split()[1]
        else:
            target = await self._start_external(cfg.server)
        await self._check_listener(target)
        return target

    async def _spawn_server(self, argv: list[str]) -> asyncio.subprocess.Process:
        """The server alone in a PID namespace, so nothing it forks can outlive the run."""
        return await self.children.spawn(self.prefix + procs.CONTAINED + argv, "server",
                                         pass_fds=self.counters.pass_fds)

    def _server_said(self) -> str:
        lines = (self.raw / "server.stderr").read_text(errors="replace").strip().splitlines()
        return f" ({lines[-1]})" if lines else ""

    async def _check_listener(self, target: str) -> None:
        """The socket the load will reach must be our server's, not a leftover's: an orphan
        of an earlier run would otherwise be measured in its place."""
        assert self.server is not None
        self.server_pid = procs.contained_pid(self.server.pid)
        if self.server_pid is None:
            raise PointFailed(f"the server exited during start-up{self._server_said()}")
        port = int(target.rpartition(":")[2])
        ours = set(process_tree(self.server.pid))
        strangers = {pid: comm for pid, comm in (await listeners(self.prefix, port)).items()
                     if pid not in ours}
        if strangers:
            named = ", ".join(f"pid {pid} ({comm})" for pid, comm in sorted(strangers.items()))
            raise PointFailed(f"port {port} is also held by {named}, which this run did not "
                              f"start (a leftover of an earlier run?): stop it (`wanbench topo "
                              f"clean`, or kill it) and resume")

    async def _start_external(self, spec: ExternalServer) -> str:
        # absolute: the command runs elsewhere (nginx reads a relative path from its prefix)
        workdir = (self.raw / "server-files").resolve()
        workdir.mkdir(exist_ok=True)
        files, argv = spec.render(workdir, self.address)
        for path, text in files.items():
            path.write_text(text)
        self.server = await self._spawn_server(pin_argv(self.config.cpus.server) + argv)
        deadline = time.monotonic() + spec.ready_timeout_s
        while time.monotonic() < deadline:
            if self.server.returncode is not None:
                raise PointFailed(f"{spec.name} exited with status {self.server.returncode}; "
                                  f"see {self.raw / 'server.stderr'}")
            if await listeners(self.prefix, spec.port):
                return f"{self.address}:{spec.port}"
            await asyncio.sleep(0.05)
        raise PointFailed(f"{spec.name} did not listen on port {spec.port} within "
                          f"{spec.ready_timeout_s} s")

    def stats(self) -> dict[str, Any] | None:
        """wb-server's counters now (None for another server): read from its mapping at this
        instant, not asked of its event loop, which would answer late when saturated."""
        if not isinstance(self.config.server, WbServer) or self.server_pid is None:
            return None
        self.check_alive()
        reading = self.counters.read()
        if reading is None:  # it maps them before it says ready
            raise PointFailed(f"wb-server said ready but has no counters in "
                              f"{self.counters.path}")
        return reading

    def check_alive(self) -> None:
        """A server that died makes the point failed, with its exit status and last words."""
        assert self.server is not None
        if self.server.returncode is not None or procs.contained_pid(self.server.pid) is None:
            status = self.server.returncode
            raise PointFailed(validity.server_exited(
                status, f"{self._server_said()}; see {self.raw / 'server.stderr'}"))

    async def confirm_held(self, count: int, timeout: float = 30.0) -> None:
        """Wait until the server has accepted the cold connections too: its side of the
        handshake completes one one-way delay after the client's, and accept() comes later."""
        deadline = time.monotonic() + timeout
        while True:
            stats = self.stats()
            if stats is None or stats["connections_current"] >= count:
                return
            if time.monotonic() > deadline:
                raise PointFailed(f"server holds {stats['connections_current']} connections "
                                  f"after {timeout:.0f} s, expected at least {count} cold ones")
            await asyncio.sleep(0.05)

    def hold_to_budget(self) -> None:
        """From the warm-up on, not while it accepts the cold connections."""
        if self.budget:
            assert self.server_pid is not None
            self.budget.admit(process_tree(self.server_pid))

    async def ready_samplers(self, *, workdir: Path, tsc_hz: float | None,
                             hardware_counters: bool, emulator_pids: list[int]) -> None:
        """The samplers made and the server's tracers (perf, wb-ktrace) loaded, before the
        runner decides the window: a tracer that loads slowly delays the window, never
        misses its start. workdir: the point's raw directory, which a server kept from an
        earlier point (harness.runner.held) does not log in."""
        cfg = self.config
        assert self.server_pid is not None
        self.sampler = WindowSampler(SamplerConfig(
            server_pid=self.server_pid, server_cpu=cfg.cpus.server, workdir=workdir,
            tsc_hz=tsc_hz, hardware_counters=hardware_counters,
            profile=cfg.profile, generator_cpu=cfg.cpus.generator, emulator_pids=emulator_pids,
            # where the machine cannot, the columns stay null (the run said why at its start)
            kernel_trace=cfg.kernel_trace and ktrace.support().tracepoints,
            late_us=cfg.hot.lateness.threshold_us,
            who_ran_refused=_who_ran_refused(),
            server_counters=self.stats))
        try:
            await self.sampler.prepare_server()
        except (PerfFailed, ktrace.KernelTraceFailed) as exc:
            raise PointFailed(str(exc)) from None

    async def measure(self, window: Window, generator_pids: list[int]) -> ServerWindow:
        """The server's counters, then the samplers, at both edges of the window (this host's
        CLOCK_MONOTONIC), with the samplers ready_samplers() made; generator_pids: the
        generators on this host, if any (a generator given the window stays until the end edge
        has been read: LoadSide.start_hot)."""
        sampler = self.sampler
        assert sampler is not None, "ready_samplers() first"
        try:
            await sampler.prepare(window.start_ns, tuple(generator_pids))  # in the warm-up
            # the samplers' tracers told each edge ahead; the server's counters, then /proc,
            # read at it
            await sampler.start(window.start_ns)
            throttled_before = self.budget.throttling() if self.budget else None
            sampled = await sampler.stop(window.end_ns)
        except (PerfFailed, ktrace.KernelTraceFailed) as exc:
            raise PointFailed(str(exc)) from None
        finally:
            await sampler.close()
            self.sampler = None
        if self.budget and throttled_before:
            sampled.update(throttling_columns(self.budget.throttling().since(throttled_before),
                                              sampled))
        self.check_alive()  # an external server has no stats to fail on
        edges = {source: Edges(*read) for source, read in sampler.edges.items()}
        return ServerWindow(sampled, *sampler.server_stats, sampler.timeseries,
                            sampler.profile_rows() if self.config.profile else [], edges)
