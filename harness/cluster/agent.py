"""A host's agent in a cluster run: a Dask actor on the worker standing for one topology
host, holding that host's processes (server or generators) between the point's phases and
stopping them on demand.

It runs the same server and load sides as a one-machine run (harness.runner.server_side,
load_side) on an event loop of its own, so the worker's own loop (heartbeats) never waits
for them, and a stop() can come while a phase is still waiting. Whatever happens to the run,
its processes end: stop() ends them, a lease ends them if the run never says stop, and they
die with the worker process (procs.spawn arms their parent-death signal)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from clients.spec import LoadSpec
from harness import manifest
from harness.cluster.targets import allowed_here
from harness.metrics import perf
from harness.runner.load_side import HotLaunch, LoadSide
from harness.runner.processes import Children
from harness.runner.server_side import ServerSide, ServerWindow
from harness.runner.window import Edges, Window, wall_edges
from harness.scenario import Scenario

T = TypeVar("T")
LOG_LIMIT_BYTES = 1 << 20  # raw logs sent back to the run; a larger one is cut to its tail
# the hot generator, its scheduled start and how late it was launched
ScheduledHot = tuple[HotLaunch, float, float]


@dataclasses.dataclass
class HotStart:
    """When a hot generator started by its host's clock."""

    start_lag_s: float  # from the scheduled start to the generator's launch
    # from the scheduled start to its first request (its connections opened): None if none
    first_request_lag_s: float | None
    # the edges it counted between, on this host's time.time() in ns (None: no window)
    edges: Edges | None = None


def missing_addresses(addresses: list[str]) -> list[str]:
    """The addresses this machine cannot bind (it does not hold them)."""
    missing = []
    for address in addresses:
        with socket.socket() as probe:
            try:
                probe.bind((address, 0))
            except OSError as exc:
                if exc.errno != errno.EADDRNOTAVAIL:
                    raise
                missing.append(address)
    return missing


class HostAgent:
    """One point's processes on this host. Created per point × repetition
    (client.submit(HostAgent, lease_s, actor=True, workers=[address]))."""

    def __init__(self, lease_s: float):
        self._loop = asyncio.new_event_loop()
        # spawned from this thread, which lives as long as the agent: the children's
        # parent-death signal follows the thread that forked them
        threading.Thread(target=self._loop.run_forever, name="wanbench-agent",
                         daemon=True).start()
        self.raw = Path(tempfile.mkdtemp(prefix="wanbench-agent-"))
        self.children = Children(self.raw)
        self.load = LoadSide(self.children, [])
        self.server: ServerSide | None = None
        self.cold: tuple[asyncio.subprocess.Process, LoadSpec] | None = None
        self.hot: asyncio.Task[ScheduledHot] | None = None
        self.stopped = False
        self._loop.call_soon_threadsafe(self._loop.call_later, lease_s, self._lease_over)

    async def _on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    def _lease_over(self) -> None:
        self._loop.create_task(self._stop()).add_done_callback(lambda _: self._loop.stop())

    # -- server side -----------------------------------------------------------------------

    async def start_server(self, config: Scenario, address: str) -> str:
        async def start() -> str:
            self.server = ServerSide(config, self.children, [], address, shared_host=False)
            return await self.server.start()
        return await self._on_loop(start())

    async def confirm_held(self, count: int) -> None:
        assert self.server is not None
        await self._on_loop(self.server.confirm_held(count))

    async def hold_to_budget(self) -> None:
        assert self.server is not None
        self.server.hold_to_budget()

    async def ready_samplers(self) -> None:
        """The server's samplers and tracers loaded; the run decides the window after."""
        server = self.server
        assert server is not None

        async def ready() -> None:
            tsc_hz, _ = manifest.tsc_hz()
            counters, _ = perf.hardware_counters()
            await server.ready_samplers(workdir=server.raw, tsc_hz=tsc_hz,
                                        hardware_counters=counters, emulator_pids=[])
        await self._on_loop(ready())

    async def measure(self, window: tuple[float, float]) -> ServerWindow:
        """The server's stats and samplers over the window (its edges on this host's
        time.time()), their edges handed back on time.time() too; no generator runs here."""
        server = self.server
        assert server is not None

        async def measure() -> ServerWindow:
            measured = await server.measure(Window.of_wall(*window), generator_pids=[])
            measured.edges = {source: wall_edges(e) for source, e in measured.edges.items()}
            return measured
        return await self._on_loop(measure())

    # -- load side -------------------------------------------------------------------------

    def _here(self, spec: LoadSpec, name: str) -> LoadSpec:
        """The spec as this worker runs it: under its own target policy (the run cannot grant
        what the worker was not started with), its document in this agent's directory."""
        spec = dataclasses.replace(spec, allow_any_target=allowed_here(),
                                   json_path=self.raw / f"{name}.json")
        spec.resolved_targets()  # raises TargetRefused before anything starts
        return spec

    async def start_cold(self, spec: LoadSpec) -> None:
        """Returns once the generator says its connections are established."""
        spec = self._here(spec, "cold")

        async def start() -> None:
            self.cold = (await self.load.start_cold(spec), spec)
        await self._on_loop(start())

    async def start_hot(self, spec: LoadSpec, start_at: float,
                        window: tuple[float, float] | None = None) -> None:
        """The hot generator launched at start_at (this host's time.time()) to measure the
        window (its edges on the same clock; None: the spec's warm-up and duration from its
        launch); returns at once."""
        spec = self._here(spec, "hot")

        async def launch() -> ScheduledHot:
            await asyncio.sleep(max(0.0, start_at - time.time()))
            lag = time.time() - start_at
            here = Window.of_wall(*window) if window is not None else None
            return await self.load.start_hot(spec, here), start_at, lag

        async def schedule() -> None:
            self.hot = asyncio.get_running_loop().create_task(launch())
        await self._on_loop(schedule())

    async def hot_result(self) -> tuple[dict[str, Any], HotStart]:
        async def result() -> tuple[dict[str, Any], HotStart]:
            assert self.hot is not None
            hot, start_at, lag = await self.hot
            document, counted = await self.load.hot_document(hot)
            first_send = document.get("first_send_unix_s")
            return document, HotStart(lag, None if first_send is None else first_send - start_at,
                                      wall_edges(counted) if counted is not None else None)
        return await self._on_loop(result())

    async def stop_cold(self) -> dict[str, Any] | None:
        assert self.cold is not None
        return await self._on_loop(self.load.stop_cold(*self.cold))

    # -- the end ---------------------------------------------------------------------------

    async def logs(self) -> dict[str, bytes]:
        """The raw logs this host wrote (argv.txt, *.stderr, server stats, documents)."""
        found = {}
        for path in sorted(self.raw.rglob("*")):
            if path.is_file():
                with path.open("rb") as log:
                    log.seek(max(0, path.stat().st_size - LOG_LIMIT_BYTES))
                    found[str(path.relative_to(self.raw))] = log.read()
        return found

    async def stop(self) -> None:
        """Ends the agent's loop too (and its thread: a child still alive would die with it)."""
        if not self._loop.is_running():  # its lease ran out
            return
        await self._on_loop(self._stop())
        self._loop.call_soon_threadsafe(self._loop.stop)

    async def _stop(self) -> None:
        """Every process of this host's point stopped, its files removed; more calls do
        nothing."""
        if self.stopped:
            return
        self.stopped = True
        if self.hot is not None:
            self.hot.cancel()
            with contextlib.suppress(BaseException):
                await self.hot
        try:
            await (self.server.stop() if self.server else self.children.stop_all())
        finally:
            shutil.rmtree(self.raw, ignore_errors=True)
