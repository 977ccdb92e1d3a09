"""A point's load side: the cold and hot (or stream) generators' specs from the scenario, the
cold connections opened and confirmed by their generator, the hot generator started on the
point's window and its document read, with the edges it counted between. The same code runs
in the run's process (one machine) or in a client host's cluster agent
(harness.cluster.agent)."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import clients
from clients.spec import NATIVE
from harness import procs
from harness.metrics.cpu import process_tree
from harness.monotonic import NS_PER_S, sleep_until, within
from harness.runner.processes import Children, PointFailed, read_line
from harness.runner.window import Edges, Window, generator_edges
from harness.scenario import Point, Scenario

# Time the hot generator may take past its window before the point fails
HOT_FINISH_MARGIN_S = 60
# An external tool (httperf, wrk, wrk2) cannot take a window and measures its whole run: it
# is started behind this gate (so the samplers know its tree from the start) when a line
# arrives on the gate's stdin, at the window's start. The gate reaps it only once its stdin
# is closed, after the samplers' last reading: a tool that ended a few ms before the window's
# end edge is still there to be read (a zombie keeps its CPU times), not read as it was at
# the reading a second before.
GATE = ["sh", "-c", 'read -r _ || exit 1; "$@" & read -r _; wait $!', "gate"]


@dataclass
class HotLaunch:
    """A hot generator started on a window: spec as launched, and (an external tool) when
    its gate opened, on CLOCK_MONOTONIC."""

    proc: asyncio.subprocess.Process
    spec: clients.LoadSpec
    opened: asyncio.Task[int] | None = None


def seed_of(point: Point, repetition: int) -> int:
    return int.from_bytes(hashlib.sha1(f"{point.point_id}/{repetition}".encode()).digest()[:4],
                          "big")


def cold_spec(cfg: Scenario, seed: int, target: str, sources: list[str] | None,
              json_path: Path | None) -> clients.LoadSpec | None:
    """The cold generator's spec: it holds its connections until stopped; None without any."""
    cold = cfg.cold
    if cold.conns == 0:
        return None
    return clients.LoadSpec(targets=[target], seed=seed, cpu=cfg.cpus.generator,
                            source_addrs=sources, generator="sclient", hot_conns=0,
                            cold_conns=cold.conns, cold_ramp_rps=cold.ramp_rps,
                            cold_interval_s=cold.interval_s, duration_s=0, json_path=json_path)


def hot_spec(cfg: Scenario, seed: int, target: str, sources: list[str] | None,
             json_path: Path | None) -> clients.LoadSpec:
    """The hot (or stream) generator's spec: warm-up, then the measured window."""
    common: dict[str, Any] = dict(targets=[target], seed=seed, cpu=cfg.cpus.generator,
                                  source_addrs=sources, duration_s=cfg.duration_s,
                                  warmup_s=cfg.warmup_s, json_path=json_path)
    if cfg.stream is not None:
        return clients.LoadSpec(generator="sclient", hot_conns=0, stream_conns=cfg.stream.conns,
                                stream_mbps=cfg.stream.mbps,
                                stream_read=cfg.stream.sender == "server", **common)
    hot = cfg.hot
    return clients.LoadSpec(
        generator=hot.generator, hot_conns=hot.conns, rate_rps=hot.rate_rps,
        arrivals=hot.arrivals, requests_per_conn=hot.requests_per_conn, pick=hot.pick,
        overload=hot.overload,
        path=hot.path, connect_timeout_s=hot.connect_timeout_s,
        response_timeout_s=hot.response_timeout_s, spin_us=hot.spin_us,
        coalesce_us=hot.coalesce_us, late_us=hot.lateness.threshold_us,
        late_limit=hot.lateness.limit, **common)


class LoadSide:
    """The generators one host runs for a point, as `children` of this host's argv prefix."""

    def __init__(self, children: Children, prefix: list[str], netns: Path | None = None):
        """netns: the namespace prefix runs the generators in (None: this process's own);
        the target rule is decided there (clients.targets)."""
        self.children, self.prefix, self.raw = children, prefix, children.raw
        self.netns = netns

    def command(self, spec: clients.LoadSpec, gate: list[str] | None = None) -> list[str]:
        """The generator's argv (behind gate, if given), its targets checked from the
        namespace it sends from."""
        if self.netns is not None:
            spec = dataclasses.replace(spec, sender_netns=str(self.netns))
        return self.prefix + (gate or []) + clients.command(spec)

    async def start_cold(self, spec: clients.LoadSpec) -> asyncio.subprocess.Process:
        """The cold generator, once it says all its connections are established."""
        proc = await self.children.spawn(self.command(spec), "cold")
        assert proc.stdout is not None
        timeout = spec.cold_conns / spec.cold_ramp_rps + 30
        line = await read_line(proc.stdout, timeout,
                               f"cold generator ({spec.cold_conns} connections)")
        event = json.loads(line)
        if event.get("event") != "cold_ready" or event.get("established", 0) < spec.cold_conns:
            raise PointFailed(f"cold connections not established: {line}")
        return proc

    async def start_hot(self, spec: clients.LoadSpec, window: Window | None) -> HotLaunch:
        """The hot generator, started now. Given the window, wb-sclient and asyncgen measure
        exactly it (warming up until its start) and stay until their stdin is closed
        (hot_document), so the samplers' last reading finds them; an external tool runs
        from the window's start for its length (GATE). Without one (`wanbench load
        --cluster`), the spec's warm-up and duration from now."""
        if window is None:
            proc = await self.children.spawn(self.command(spec), "hot")
            return HotLaunch(proc, spec)
        if spec.generator in NATIVE:
            spec = dataclasses.replace(spec, window_start_ns=window.start_ns,
                                       window_end_ns=window.end_ns)
            argv = self.command(spec)
        else:
            spec = dataclasses.replace(spec, warmup_s=0.0, duration_s=window.length_s)
            argv = self.command(spec, gate=GATE)
        proc = await self.children.spawn(argv, "hot", stdin=asyncio.subprocess.PIPE)
        opened = (None if spec.generator in NATIVE
                  else asyncio.get_running_loop().create_task(_open_gate(proc, window)))
        return HotLaunch(proc, spec, opened)

    async def hot_document(self, hot: HotLaunch) -> tuple[dict[str, Any], Edges | None]:
        """The hot generator's result document once it has exited, and the edges it counted
        between: its own (clients/SCHEMA.md `window`); else, an external tool measuring its
        whole run, its gate's opening and the run it says it measured from there
        (`duration_s`), or its exit when it does not say; None without a window."""
        proc, spec = hot.proc, hot.spec
        opened = await hot.opened if hot.opened is not None else None
        if proc.stdin is not None:
            proc.stdin.close()  # releases it (communicate() without input leaves stdin open)
        out, _ = await within(proc.communicate(),
                              spec.warmup_s + spec.duration_s + HOT_FINISH_MARGIN_S)
        exited = time.monotonic_ns()
        (self.raw / "hot.stdout").write_bytes(out)
        if proc.returncode != 0:
            raise PointFailed(f"{spec.generator} exited with status {proc.returncode}; "
                              f"see {self.raw / 'hot.stderr'}")
        document = clients.parse_result(spec, out.decode(errors="replace"),
                                        (self.raw / "hot.stderr").read_text(errors="replace"))
        counted = generator_edges(document)
        if counted is not None or opened is None:
            return document, counted
        ran_s = document.get("duration_s")
        return document, Edges(opened, opened + round(ran_s * NS_PER_S) if ran_s else exited)

    async def established(self, proc: asyncio.subprocess.Process,
                          spec: clients.LoadSpec) -> int:
        """The connections to spec's target that proc (and its shards) holds established
        now, counted from their sockets: a cold generator kept running for the next point
        writes its document only when it stops."""
        port = spec.targets[0].rpartition(":")[2]
        probe = await asyncio.create_subprocess_exec(
            *self.prefix, "ss", "-Htnp", "state", "established", f"dport = :{port}",
            stdout=asyncio.subprocess.PIPE)
        out, _ = await probe.communicate()
        ours = set(process_tree(proc.pid))
        return sum(1 for line in out.decode(errors="replace").splitlines()
                   if ours.intersection(map(int, re.findall(r"pid=(\d+)", line))))

    async def stop_cold(self, proc: asyncio.subprocess.Process | None,
                        spec: clients.LoadSpec | None) -> dict[str, Any] | None:
        """Stopped, the cold generator writes its document (at spec.json_path)."""
        if proc is None or spec is None or spec.json_path is None:
            return None
        await procs.stop(proc, signal.SIGTERM, timeout=30)
        path = Path(spec.json_path)
        return json.loads(path.read_text()) if path.is_file() else None


async def _open_gate(proc: asyncio.subprocess.Process, window: Window) -> int:
    """At the window's start, the line that lets GATE exec the tool; when it was sent."""
    assert proc.stdin is not None
    await sleep_until(window.start_ns)
    proc.stdin.write(b"\n")
    await proc.stdin.drain()
    return time.monotonic_ns()
