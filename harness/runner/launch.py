"""One point × repetition launched and measured: topology endpoints in, a Measurement out."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import signal
import time
from dataclasses import dataclass
from typing import Any

import clients
from clients import validity
from clients.pinning import pin_argv
from clients.targets import check_target
from harness import procs, servers
from harness.cgroups import CpuBudget, Throttling
from harness.metrics.cpu import process_tree
from harness.metrics.sampler import SamplerConfig, WindowSampler
from harness.runner.context import Endpoints, RunContext
from harness.scenario import ExternalServer, Point, WbServer

# The samplers' window closes this long before the hot generator's, timed from the generator's
# start: a generator that has exited by the last reading keeps the CPU it had at the reading
# before, up to a second earlier, and a generator busy all of a 3 s window read 67 %
GENERATOR_TAIL_S = 0.1


class PointFailed(RuntimeError):
    """A point that could not be measured; recorded as invalid with this reason."""



def seed_of(point: Point, repetition: int) -> int:
    return int.from_bytes(hashlib.sha1(f"{point.point_id}/{repetition}".encode()).digest()[:4],
                          "big")


async def _read_line(stream: asyncio.StreamReader, timeout: float, what: str) -> str:
    try:
        line = await asyncio.wait_for(stream.readline(), timeout)
    except TimeoutError:
        raise PointFailed(f"{what}: no answer within {timeout:.0f} s") from None
    if not line:
        raise PointFailed(f"{what}: exited before it was ready")
    return line.decode(errors="replace").strip()


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


@dataclass
class Measurement:
    """What one point × repetition measured, before anything is judged."""

    document: dict[str, Any]  # the hot (or stream) generator's result (clients/SCHEMA.md)
    cold: dict[str, Any] | None  # the cold generator's last document; None without cold load
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
        self.ctx, self.ends, self.point, self.repetition = ctx, ends, point, repetition
        self.config = point.config
        self.raw = ctx.run_dir.raw_dir(point.point_id, repetition, fresh=attempt == 0)
        if attempt:  # the earlier attempts' logs stay beside this one's
            self.raw = self.raw / f"attempt-{attempt}"
            self.raw.mkdir()
        self.children: list[asyncio.subprocess.Process] = []
        self.server: asyncio.subprocess.Process | None = None  # unshare, the server's parent
        self.server_pid: int | None = None  # the server itself: stats, CPU, sockets
        self.stats_path = self.raw / "server-stats.json"
        self.budget: CpuBudget | None = None  # the server's cgroup, when it has a CPU budget

    async def _spawn(self, argv: list[str], log: str) -> asyncio.subprocess.Process:
        with (self.raw / "argv.txt").open("a") as record:
            record.write(json.dumps(argv) + "\n")
        with (self.raw / f"{log}.stderr").open("wb") as stderr:  # the child keeps its copy
            proc = await procs.spawn(argv, stdout=asyncio.subprocess.PIPE, stderr=stderr)
        self.children.append(proc)
        return proc

    async def run(self) -> Measurement:
        cpus = self.config.cpus
        with (CpuBudget(cpus.server_budget_pct, cpus.budget_period_us)
              if cpus.server_budget_pct else contextlib.nullcontext()) as self.budget:
            try:
                return await self._measure()
            finally:  # before the group goes: it cannot be removed while they are in it
                for proc in reversed(self.children):
                    await procs.stop(proc)

    # -- server -------------------------------------------------------------------------------

    async def _start_server(self) -> str:
        cfg, ends = self.config, self.ends
        address = ends.address(ends.server_host)
        if isinstance(cfg.server, WbServer):
            port = 0 if ends.shared_host else cfg.server.port
            server = servers.ServerConfig(
                dispatch=cfg.server.dispatch, accept=cfg.server.accept,
                reply_bytes=cfg.server.reply_bytes, listen=f"{address}:{port}",
                backlog=cfg.server.backlog, workers=cfg.server.workers, cpu=cfg.cpus.server,
                stats_path=self.stats_path, sink=cfg.stream is not None,
                rt_signal_queue=cfg.server.rt_signal_queue)
            self.server = await self._spawn_server(server.argv())
            assert self.server.stdout is not None
            try:
                line = await _read_line(self.server.stdout, 10, "wb-server")
            except PointFailed as exc:
                raise PointFailed(f"{exc}{self._server_said()}") from None
            if not line.startswith("ready "):
                raise PointFailed(f"wb-server said {line!r} instead of 'ready ADDR:PORT'")
            target = line.split()[1]
        else:
            target = await self._start_external(cfg.server, address)
        await self._check_listener(target)
        return target

    async def _spawn_server(self, argv: list[str]) -> asyncio.subprocess.Process:
        """The server alone in a PID namespace, so nothing it forks can outlive the run."""
        return await self._spawn(self.ends.prefix(self.ends.server_host)
                                 + procs.CONTAINED + argv, "server")

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
        strangers = {pid: comm for pid, comm in
                     (await listeners(self.ends.prefix(self.ends.server_host), port)).items()
                     if pid not in ours}
        if strangers:
            named = ", ".join(f"pid {pid} ({comm})" for pid, comm in sorted(strangers.items()))
            raise PointFailed(f"port {port} is also held by {named}, which this run did not "
                              f"start (a leftover of an earlier run?): stop it (`wanbench topo "
                              f"clean`, or kill it) and resume")

    async def _start_external(self, spec: ExternalServer, address: str) -> str:
        # absolute: the command runs elsewhere (nginx reads a relative path from its prefix)
        workdir = (self.raw / "server-files").resolve()
        workdir.mkdir(exist_ok=True)
        files, argv = spec.render(workdir, address)
        for path, text in files.items():
            path.write_text(text)
        prefix = self.ends.prefix(self.ends.server_host)
        self.server = await self._spawn_server(pin_argv(self.config.cpus.server) + argv)
        deadline = time.monotonic() + spec.ready_timeout_s
        while time.monotonic() < deadline:
            if self.server.returncode is not None:
                raise PointFailed(f"{spec.name} exited with status {self.server.returncode}; "
                                  f"see {self.raw / 'server.stderr'}")
            if await listeners(prefix, spec.port):
                return f"{address}:{spec.port}"
            await asyncio.sleep(0.05)
        raise PointFailed(f"{spec.name} did not listen on port {spec.port} within "
                          f"{spec.ready_timeout_s} s")

    async def _server_stats(self) -> dict[str, Any] | None:
        if not isinstance(self.config.server, WbServer) or self.server_pid is None:
            return None
        self._check_server_alive()
        try:
            return await asyncio.to_thread(servers.snapshot_stats, self.server_pid,
                                           self.stats_path)
        except (ProcessLookupError, TimeoutError):
            self._check_server_alive()
            raise

    def _check_server_alive(self) -> None:
        """A server that died makes the point failed, with its exit status and last words."""
        assert self.server is not None
        if self.server.returncode is not None or procs.contained_pid(self.server.pid) is None:
            status = self.server.returncode
            raise PointFailed(validity.server_exited(
                status, f"{self._server_said()}; see {self.raw / 'server.stderr'}"))

    # -- load ---------------------------------------------------------------------------------

    def _load_spec(self, target: str, host: str | None, **fields: Any) -> clients.LoadSpec:
        return clients.LoadSpec(targets=[target], seed=seed_of(self.point, self.repetition),
                                cpu=self.config.cpus.generator,
                                source_addrs=self.ends.sources(host), **fields)

    async def _start_cold(self, target: str) -> asyncio.subprocess.Process | None:
        cold = self.config.cold
        if cold.conns == 0:
            return None
        spec = self._load_spec(target, self.ends.cold_host, generator="sclient", hot_conns=0,
                               cold_conns=cold.conns,
                               cold_ramp_rps=cold.ramp_rps, cold_interval_s=cold.interval_s,
                               duration_s=0, json_path=self.raw / "cold.json")
        proc = await self._spawn(self.ends.prefix(self.ends.cold_host) + clients.command(spec),
                                 "cold")
        assert proc.stdout is not None
        timeout = cold.conns / cold.ramp_rps + 30
        line = await _read_line(proc.stdout, timeout, f"cold generator ({cold.conns} connections)")
        event = json.loads(line)
        if event.get("event") != "cold_ready" or event.get("established", 0) < cold.conns:
            raise PointFailed(f"cold connections not established: {line}")
        await self._confirm_held(cold.conns)
        self.ctx.on_event(f"{cold.conns} cold connections established")
        return proc

    async def _confirm_held(self, count: int, timeout: float = 30.0) -> None:
        """Wait until the server has accepted them too: its side of the handshake completes
        one one-way delay after the client's, and accept() comes later still."""
        deadline = time.monotonic() + timeout
        while True:
            stats = await self._server_stats()
            if stats is None or stats["connections_current"] >= count:
                return
            if time.monotonic() > deadline:
                raise PointFailed(f"server holds {stats['connections_current']} connections "
                                  f"after {timeout:.0f} s, expected at least {count} cold ones")
            await asyncio.sleep(0.05)

    def _hot_spec(self, target: str) -> clients.LoadSpec:
        cfg = self.config
        hot = cfg.hot
        common = dict(duration_s=cfg.duration_s, warmup_s=cfg.warmup_s,
                      json_path=self.raw / "hot.json")
        if cfg.stream is not None:
            return self._load_spec(target, self.ends.hot_host, generator="sclient", hot_conns=0,
                                   stream_conns=cfg.stream.conns, stream_mbps=cfg.stream.mbps,
                                   **common)
        return self._load_spec(
            target, self.ends.hot_host, generator=hot.generator, hot_conns=hot.conns,
            rate_rps=hot.rate_rps, arrivals=hot.arrivals,
            requests_per_conn=hot.requests_per_conn, pick=hot.pick, path=hot.path,
            connect_timeout_s=hot.connect_timeout_s, response_timeout_s=hot.response_timeout_s,
            spin_us=hot.spin_us, coalesce_us=hot.coalesce_us, **common)

    async def _measure(self) -> Measurement:
        cfg = self.config
        target = await self._start_server_checked()
        cold_proc = await self._start_cold(target)
        if self.budget:  # held to its budget from the warm-up on, not while it accepts cold
            assert self.server_pid is not None
            self.budget.admit(process_tree(self.server_pid))
        spec = self._hot_spec(target)
        hot = await self._spawn(self.ends.prefix(self.ends.hot_host) + clients.command(spec),
                                "hot")
        loop = asyncio.get_running_loop()
        # the generator measures from warmup_s after its start to duration_s later
        window_end = loop.time() + cfg.warmup_s + cfg.duration_s - GENERATOR_TAIL_S
        await asyncio.sleep(cfg.warmup_s)
        assert self.server is not None
        assert self.server_pid is not None
        sampler = WindowSampler(SamplerConfig(
            server_pid=self.server_pid, server_cpu=cfg.cpus.server, workdir=self.raw,
            generator_pids=[p.pid for p in (hot, cold_proc) if p is not None],
            tsc_hz=self.ctx.tsc_hz, hardware_counters=self.ctx.hardware_counters,
            profile=cfg.profile, generator_cpu=cfg.cpus.generator,
            emulator_pids=self.ends.handle.emulator_pids()))
        stats_before = await self._server_stats()
        throttled_before = self.budget.throttling() if self.budget else None
        await sampler.start()
        # reading the server's stats and starting the samplers took some of the window
        await asyncio.sleep(max(0.0, window_end - loop.time()))
        window = await sampler.stop()
        if self.budget and throttled_before:
            window.update(throttling_columns(self.budget.throttling().since(throttled_before),
                                             window))
        stats_after = await self._server_stats()
        self._check_server_alive()  # an external server has no stats to fail on
        out, _ = await asyncio.wait_for(hot.communicate(), cfg.duration_s + 60)
        (self.raw / "hot.stdout").write_bytes(out)
        if hot.returncode != 0:
            raise PointFailed(f"{spec.generator} exited with status {hot.returncode}; "
                              f"see {self.raw / 'hot.stderr'}")
        document = clients.parse_result(spec, out.decode(errors="replace"),
                                        (self.raw / "hot.stderr").read_text(errors="replace"))
        cold_doc = await self._stop_cold(cold_proc)
        return Measurement(document, cold_doc, window, stats_before, stats_after,
                           sampler.timeseries, sampler.profile_rows() if cfg.profile else [])

    async def _start_server_checked(self) -> str:
        target = await self._start_server()
        host, _, _ = target.rpartition(":")
        check_target(host)  # topologies only hand out loopback and 198.18.0.0/15
        return target

    async def _stop_cold(self, proc: asyncio.subprocess.Process | None) -> dict[str, Any] | None:
        if proc is None:
            return None
        await procs.stop(proc, signal.SIGTERM, timeout=30)
        path = self.raw / "cold.json"
        return json.loads(path.read_text()) if path.is_file() else None
