"""Runs a scenario: for each point × repetition, topology, server, cold and hot load, samplers."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import clients
from clients import validity
from clients.paths import binary
from clients.pinning import pin_argv
from clients.targets import check_target
from harness import interrupts, procs, servers, topology
from harness.metrics.cpu import process_tree
from harness.metrics.sampler import SamplerConfig, WindowSampler
from harness.results import SCHEMA_VERSION, RunDir
from harness.scenario import ExternalServer, Point, Scenario, WbServer, points, sweep_columns

SERVER_STATS_DELTAS = ("dispatch_calls", "dispatch_events", "signals_dequeued",
                       "sigio_overflows", "fallback_rescans", "requests", "replies",
                       "connections_accepted", "accept_calls", "emfile_events")
RTSIG_ONLY = ("signals_dequeued", "sigio_overflows", "fallback_rescans")


class MissingTool(RuntimeError):
    """A program the scenario needs is not installed; the message names the fix."""


GENERATOR_FIX = {
    "httperf": "apt-get install httperf",
    "wrk": "apt-get install wrk",
    "wrk2": "wrk2 is not packaged: build it from source and put it on PATH",
}


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
        if tool in GENERATOR_FIX and shutil.which(tool) is None:
            raise MissingTool(f"hot.generator {tool} is not on PATH; fix: {GENERATOR_FIX[tool]}"
                              f", or use hot.generator: sclient")


class PointFailed(RuntimeError):
    """A point that could not be measured; recorded as invalid with this reason."""


@dataclass
class RunContext:
    """What every point of one run shares."""

    scenario: Scenario
    scenario_dir: Path
    run_dir: RunDir
    run_id: str
    tsc_hz: float | None
    hardware_counters: bool
    backend: str | None = None
    on_event: Callable[[str], None] = print
    topology_manifest: dict[str, Any] = field(default_factory=dict)


@dataclass
class Endpoints:
    """Where the server listens and from which namespaces the clients run."""

    handle: Any  # harness.topology TopologyHandle
    server_host: str | None
    hot_host: str | None
    cold_host: str | None

    def prefix(self, host: str | None) -> list[str]:
        return self.handle.exec_prefix(host) if host else []

    def address(self, host: str | None) -> str:
        return self.handle.address(host) if host else "127.0.0.1"

    def sources(self, host: str | None) -> list[str] | None:
        """Addresses a client host may bind: many, so cold connections do not run out of ports."""
        return self.handle.addresses(host) if host else None

    @property
    def shared_host(self) -> bool:
        """Loopback: everything in this namespace, so the server takes any free port."""
        return self.server_host is None or self.handle.netns(self.server_host) is None


def _first(handle: Any, *roles: str) -> str | None:
    for role in roles:
        hosts = handle.role_hosts(role)
        if hosts:
            return hosts[0]
    return None


def endpoints(handle: Any) -> Endpoints:
    return Endpoints(handle, _first(handle, "server"), _first(handle, "hot", "cold"),
                     _first(handle, "cold", "hot"))


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


class PointRun:
    """One point × repetition, with every process it starts stopped on the way out."""

    def __init__(self, ctx: RunContext, ends: Endpoints, point: Point, repetition: int,
                 attempt: int = 0):
        self.ctx, self.ends, self.point, self.repetition = ctx, ends, point, repetition
        self.config, self.attempt = point.config, attempt
        self.raw = ctx.run_dir.raw_dir(point.point_id, repetition, fresh=attempt == 0)
        if attempt:  # the earlier attempts' logs stay beside this one's
            self.raw = self.raw / f"attempt-{attempt}"
            self.raw.mkdir()
        self.children: list[asyncio.subprocess.Process] = []
        self.server: asyncio.subprocess.Process | None = None  # unshare, the server's parent
        self.server_pid: int | None = None  # the server itself: stats, CPU, sockets
        self.stats_path = self.raw / "server-stats.json"

    async def _spawn(self, argv: list[str], log: str) -> asyncio.subprocess.Process:
        with (self.raw / "argv.txt").open("a") as record:
            record.write(json.dumps(argv) + "\n")
        with (self.raw / f"{log}.stderr").open("wb") as stderr:  # the child keeps its copy
            proc = await procs.spawn(argv, stdout=asyncio.subprocess.PIPE, stderr=stderr)
        self.children.append(proc)
        return proc

    async def run(self) -> dict[str, Any]:
        try:
            return await self._measure()
        finally:
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
        return await self._spawn(self.ends.prefix(self.ends.server_host) + procs.CONTAINED
                                 + argv, "server")

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
        workdir = self.raw / "server-files"
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
            requests_per_conn=hot.requests_per_conn, path=hot.path,
            connect_timeout_s=hot.connect_timeout_s, response_timeout_s=hot.response_timeout_s,
            spin_us=hot.spin_us, **common)

    async def _measure(self) -> dict[str, Any]:
        cfg = self.config
        target = await self._start_server_checked()
        cold_proc = await self._start_cold(target)
        spec = self._hot_spec(target)
        hot = await self._spawn(self.ends.prefix(self.ends.hot_host) + clients.command(spec),
                                "hot")
        await asyncio.sleep(cfg.warmup_s)
        assert self.server is not None
        assert self.server_pid is not None
        sampler = WindowSampler(SamplerConfig(
            server_pid=self.server_pid, server_cpu=cfg.cpus.server, workdir=self.raw,
            generator_pids=[p.pid for p in (hot, cold_proc) if p is not None],
            tsc_hz=self.ctx.tsc_hz, hardware_counters=self.ctx.hardware_counters,
            profile=cfg.profile, generator_cpu=cfg.cpus.generator))
        stats_before = await self._server_stats()
        await sampler.start()
        await asyncio.sleep(cfg.duration_s)
        window = await sampler.stop()
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
        return self._record(document, cold_doc, window, stats_before, stats_after,
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

    def _single_process_server(self) -> bool:
        return isinstance(self.config.server, WbServer) and self.config.server.workers == 1

    def _server_cpus(self) -> int:
        """CPUs the server may use: one when pinned, else its workers (at most the machine's)."""
        if self.config.cpus.server is not None:
            return 1
        workers = self.config.server.workers if isinstance(self.config.server, WbServer) else 1
        return max(1, min(workers, os.cpu_count() or 1))

    # -- record -------------------------------------------------------------------------------

    def _record(self, doc: dict[str, Any], cold_doc: dict[str, Any] | None,
                window: dict[str, Any], before: dict[str, Any] | None,
                after: dict[str, Any] | None, samples: list[dict[str, Any]],
                profile_rows: list[dict[str, Any]]) -> dict[str, Any]:
        ids = {"run_id": self.ctx.run_id, "point_id": self.point.point_id,
               "repetition": self.repetition}
        row: dict[str, Any] = {**ids, "scenario": self.config.name,
                               "kernel_release": self.ctx.run_id.split("-", 1)[1],
                               **self.point.columns, "duration_s": doc.get("duration_s")}
        row.update(generator_metrics(doc))
        row.update(window)
        row.update(server_deltas(before, after, self.config))
        reasons = list(doc.get("invalid_reasons") or [])
        if not any(r.startswith("generator CPU saturated") for r in reasons):
            # the hot and cold generators share their CPU: judge the sum
            reasons.append(validity.generator_saturated(row.get("cpu_generator_pct")))
        if cold_doc is not None:
            row["cold_held"] = (cold_doc.get("cold") or {}).get("held")
            reasons.append(validity.cold_lost(row["cold_held"], self.config.cold.conns))
        row["server_saturated"] = validity.server_saturated(
            row.get("reply_rate_rps"), doc.get("offered_rate_rps"), row.get("cpu_server_pct"),
            self._server_cpus(), row.get("server_wait_pct"))
        interference = [r for r in (
            validity.stolen(row.get("steal_server_cpu_pct"), row.get("steal_generator_cpu_pct")),
            # a server's own workers share its CPU: their waits are not interference
            validity.crowded(row.get("server_wait_pct"), self.config.cpus.server)
            if self._server_cpus() == 1 and self._single_process_server() else None) if r]
        reasons.append(validity.closed_loop_elsewhere(
            doc.get("offered_rate_rps"), row.get("hot_conns"), row["server_saturated"],
            row.get("cpu_server_pct")) if self.config.stream is None else None)
        reasons = [r for r in reasons if r]
        row["valid"] = not (reasons or interference)
        row["invalid_reason"] = "; ".join(reasons + interference) or None
        row["interference_only"] = bool(interference) and not reasons
        row["attempt"] = self.attempt
        timeline = [{**ids, "t_s": entry["t_s"], "source": "generator", "metric": key,
                     "value": entry[key]}
                    for entry in doc.get("timeline") or [] for key in entry if key != "t_s"]
        return {
            "point": row,
            "timeseries": timeline + [{**ids, **sample} for sample in samples],
            "histograms": histogram_rows(doc, ids),
            "profiles": [{**ids, **prow} for prow in profile_rows],
        }


def _ms(value: float | None) -> float | None:
    return value / 1000.0 if value is not None else None


def generator_metrics(doc: dict[str, Any]) -> dict[str, Any]:
    """Point columns from a generator result document (clients/SCHEMA.md)."""
    errors = doc.get("errors") or {}
    latency = doc.get("latency") or {}
    streaming = doc.get("stream") is not None  # bulk writes: no requests, no replies
    row: dict[str, Any] = {
        "reply_rate_rps": None if streaming else success_rate(doc),
        "replies_non_2xx": None if streaming else _non_2xx(doc),
        "request_rate_rps": None if streaming else doc.get("request_rate_rps"),
        "errors_total": sum(v for v in errors.values() if v is not None) if errors else None,
        "timeouts_total": (errors.get("connect_timeout") or 0)
        + (errors.get("response_timeout") or 0) if errors else None,
        "late_sends": doc.get("late_sends"),
        "stream_throughput_mbps": (doc.get("stream") or {}).get("achieved_mbps"),
    }
    for kind, prefix in (("corrected", "resp_time"), ("uncorrected", "resp_time_uncorrected")):
        hist = latency.get(kind) or {}
        for stat in ("mean", "p50", "p99"):
            row[f"{prefix}_{stat}_ms"] = _ms(hist.get(f"{stat}_us"))
    return row


def _by_status(doc: dict[str, Any]) -> dict[str, int]:
    return (doc.get("replies") or {}).get("by_status") or {}


def _non_2xx(doc: dict[str, Any]) -> int | None:
    statuses = _by_status(doc)
    return sum(n for code, n in statuses.items() if not code.startswith("2")) if statuses \
        else None


def success_rate(doc: dict[str, Any]) -> float | None:
    """2xx replies per second of the window: a server answering 400 or 503 is not serving.
    Generators count replies of every status; their status breakdown gives the 2xx share."""
    statuses, rate = _by_status(doc), doc.get("reply_rate_rps")
    total = sum(statuses.values())
    if rate is None or not total:
        return rate
    return rate * sum(n for code, n in statuses.items() if code.startswith("2")) / total


def server_deltas(before: dict[str, Any] | None, after: dict[str, Any] | None,
                  config: Scenario) -> dict[str, Any]:
    row: dict[str, Any] = {}
    rtsig = isinstance(config.server, WbServer) and config.server.dispatch == "rtsig"
    for key in SERVER_STATS_DELTAS:
        if before is None or after is None or (key in RTSIG_ONLY and not rtsig):
            row[key] = None
        else:
            row[key] = after.get(key, 0) - before.get(key, 0)
    calls, events = row["dispatch_calls"], row["dispatch_events"]
    row["events_per_dispatch"] = events / calls if calls else None
    row["server_connections_max"] = after.get("connections_max") if after else None
    row = {("server_" + k if k in ("requests", "replies") else k): v for k, v in row.items()}
    return row


def histogram_rows(doc: dict[str, Any], ids: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for kind, hist in (doc.get("latency") or {}).items():
        for lo, hi, count in (hist or {}).get("buckets") or []:
            rows.append({**ids, "kind": kind, "lo_us": lo, "hi_us": hi, "count": count})
    return rows


# -- the whole run -------------------------------------------------------------------------------

def base_manifest(ctx: RunContext, machine: dict[str, Any], reason: str) -> dict[str, Any]:
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
        **machine,
        "perf": {"hardware_counters": ctx.hardware_counters, "reason": reason,
                 "cycles_source": "perf stat -C <server cpu>" if ctx.hardware_counters
                 else "estimated: server CPU busy time × TSC frequency"},
        "topology": ctx.topology_manifest,
    }


class TopologyCache:
    """Keeps one topology up while consecutive points share it (same file and overrides).

    Each topology brought up is one entry of the manifest's `topology.instances`, rewritten
    after teardown so that it carries the emulator's counters too."""

    def __init__(self, ctx: RunContext):
        self.ctx = ctx
        self.key: str | None = None
        self.ends: Endpoints | None = None
        self.stack = contextlib.ExitStack()

    def get(self, point: Point) -> Endpoints:
        if point.topology_key == self.key and self.ends is not None:
            return self.ends
        self.close()
        ref = point.config.topology
        topo = topology.load_topology(ref.path(self.ctx.scenario_dir), dict(ref.set) or None)
        backend = self.ctx.backend or ref.backend
        with interrupts.raising():  # calibration blocks: a signal must not wait for it
            handle = self.stack.enter_context(topology.bring_up(
                topo, backend=backend, run_prefix=None, handle_signals=False))
        self.ctx.on_event(f"topology {ref.file} up (backend {handle.backend})")
        self.key = point.topology_key
        self.ends = endpoints(handle)
        self.ctx.topology_manifest.update(file=ref.file, backend=handle.backend,
                                          probe=handle.probe)
        self.ctx.topology_manifest.setdefault("instances", []).append(self._describe())
        return self.ends

    def _describe(self) -> dict[str, Any]:
        assert self.ends is not None
        return {"set": json.loads(self.key or "{}").get("set", {}),
                **self.ends.handle.manifest()}

    def close(self) -> None:
        self.stack.close()
        if self.ends is not None:
            self.ctx.topology_manifest["instances"][-1] = self._describe()
        self.stack = contextlib.ExitStack()
        self.key = self.ends = None


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
            else:  # points sharing a topology stay together: one bring-up each per round
                round_.sort(key=lambda point: point.topology_key)
            todo += [(point, rep) for point in round_]
    return [(point, rep) for point, rep in todo
            if RunDir.record_name(point.point_id, rep) not in done]


async def run_points(ctx: RunContext, todo: list[tuple[Point, int]],
                     progress: Callable[[Point, int, dict[str, Any]], None]) -> None:
    """Measure each pending point × repetition; each record is on disk before the next starts."""
    cache = TopologyCache(ctx)
    try:
        for point, rep in todo:
            for attempt in range(ctx.scenario.interference_retries + 1):
                ends = cache.get(point)
                try:
                    record = await PointRun(ctx, ends, point, rep, attempt).run()
                except PointFailed as exc:
                    record = failed_record(ctx, point, rep, str(exc))
                if not record["point"].get("interference_only"):
                    break
                ctx.run_dir.write_attempt(point.point_id, rep, attempt, record)
                ctx.on_event(f"{point.axis_values} rep {rep} attempt {attempt}: "
                             f"{record['point']['invalid_reason']}")
            ctx.run_dir.write_record(point.point_id, rep, record)
            ctx.run_dir.rebuild_tables()
            progress(point, rep, record["point"])
    finally:
        cache.close()


def failed_record(ctx: RunContext, point: Point, repetition: int, reason: str) -> dict[str, Any]:
    ctx.on_event(f"point {point.axis_values} rep {repetition} failed: {reason}")
    row = {"run_id": ctx.run_id, "point_id": point.point_id, "repetition": repetition,
           "scenario": ctx.scenario.name, "kernel_release": ctx.run_id.split("-", 1)[1],
           **point.columns, "valid": False, "invalid_reason": reason}
    return {"point": row, "timeseries": [], "histograms": [], "profiles": []}
