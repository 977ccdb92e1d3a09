"""One point × repetition across the cluster's hosts: the same phases as on one machine
(harness.runner.launch), each run by the agent of the host it belongs to, and the same
Measurement out.

  1. the server started on the server host (and checked, as on one machine);
  2. the cold connections opened on every cold host, then the server confirms it holds them
     all: the barrier before anything is measured;
  3. the clocks read; one scheduled start for every hot host's generator, and one window
     (decided on the run's host's time.time(), harness.runner.window) for the generators and
     the server host's stats and samplers, each host given the times its own clock reads
     then; each hands back the edges its sources used, converted back to the run's clock;
  4. the hot documents merged exactly and judged with the clocks of the hosts that keep the
     scheduled start (harness.cluster.coordinator.judged_merge, clients.validity).
A worker that leaves the scheduler during any phase fails the point naming its host
(clients.validity.worker_lost); every host's processes are stopped whatever happened."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clients.schema import merge_documents
from clients.spec import LoadSpec
from harness.cluster.coordinator import START_MARGIN_S, clock_offsets, judged_merge, split
from harness.cluster.hosts import PHASE_TIMEOUT_S, HostAgents
from harness.cluster.placement import HostWorker, Placement
from harness.monotonic import NS_PER_S
from harness.results.rows import cold_held
from harness.runner.launch import Measurement
from harness.runner.load_side import HOT_FINISH_MARGIN_S, cold_spec, hot_spec
from harness.runner.processes import PointFailed
from harness.runner.window import Edges, Window
from harness.scenario import Scenario


@dataclass
class HostTiming:
    """How one host kept to the point's schedule (the manifest's cluster.points)."""

    clock_offset_s: float
    clock_uncertainty_s: float
    start_lag_s: float | None = None  # hot hosts: scheduled start to the generator's launch
    first_request_lag_s: float | None = None  # hot hosts: scheduled start to the first request


class ClusterPoint:
    """Runs one point × repetition on the agents of placement's hosts; abort() from another
    thread stops it (the run was interrupted)."""

    def __init__(self, client: Any, placement: Placement, config: Scenario, seed: int,
                 raw: Path, on_event: Callable[[str], None]):
        self.client, self.placement, self.config, self.seed = client, placement, config, seed
        self.raw, self.on_event = raw, on_event
        hosts = placement.hosts.values()
        self.hosts = HostAgents(client, {hw.name: hw.worker for hw in hosts},
                                {hw.name: f"host {hw.host}: " for hw in hosts}.__getitem__)
        self.timing: dict[str, HostTiming] = {}  # worker name →

    def run(self) -> Measurement:
        # the agents' handles find their client as the current one (in this thread)
        with self.client.as_current():
            try:
                return self._measure()
            finally:
                self.hosts.stop(self._keep_logs, self.on_event)

    def abort(self) -> None:
        with self.client.as_current():
            self.hosts.stop(self._keep_logs, self.on_event)

    def _measure(self) -> Measurement:
        cfg, placement, hosts = self.config, self.placement, self.hosts
        server_name = placement.server.name
        hot_names = [hw.name for hw in placement.hot]
        cold_names = [hw.name for hw in placement.cold]
        agents = hosts.start(cfg.warmup_s + cfg.duration_s + cfg.cold.conns / cfg.cold.ramp_rps)
        server = agents[server_name]
        target = hosts.wait({server_name: server.start_server(
            cfg, placement.server.addresses[0])})[server_name]
        cold = cold_spec(cfg, self.seed, target, None, None)
        if cold is not None:
            shards = self._shards(cold, placement.cold)
            hosts.each(cold_names, lambda agent, i: agent.start_cold(shards[i]),
                       PHASE_TIMEOUT_S + cold.cold_conns / cold.cold_ramp_rps)
            hosts.wait({server_name: server.confirm_held(cold.cold_conns)})
            self.on_event(f"{cold.cold_conns} cold connections established on "
                          f"{len(shards)} host(s)")
        hosts.wait({server_name: server.hold_to_budget()})
        hosts.wait({server_name: server.ready_samplers()})  # before the window is decided
        clocks = clock_offsets(self.client, {hw.worker: hw.name
                                             for hw in placement.hosts.values()})
        self.timing = {name: HostTiming(c.offset_s, c.uncertainty_s) for name, c in clocks.items()}
        hot = self._shards(hot_spec(cfg, self.seed, target, None, None), placement.hot)
        start_at = time.time() + START_MARGIN_S
        # the window on the run's host's time.time(), in ns
        window = Window.after(cfg.warmup_s, cfg.duration_s, now_ns=round(start_at * NS_PER_S))

        def here(name: str) -> tuple[float, float]:
            """The window's edges as host `name`'s clock reads them."""
            moved = window.on_clock(clocks[name].offset_s)
            return moved.start_ns / NS_PER_S, moved.end_ns / NS_PER_S
        # each host is given the times its own clock reads at the scheduled start and edges
        hosts.each(hot_names, lambda agent, i: agent.start_hot(
            hot[i], start_at + clocks[hot_names[i]].offset_s, here(hot_names[i])))
        sampled = server.measure(here(server_name))
        run_s = START_MARGIN_S + cfg.warmup_s + cfg.duration_s + HOT_FINISH_MARGIN_S
        results = hosts.each(hot_names, lambda agent, _: agent.hot_result(), run_s)
        measured = hosts.wait({server_name: sampled})[server_name]
        edges = {source: self._on_run_clock(server_name, e)
                 for source, e in measured.edges.items()}
        counted = [self._on_run_clock(name, started.edges) for name, (_, started)
                   in results.items() if started.edges is not None]
        if counted:
            edges["generator"] = _furthest(counted, window)
        for name, (_, started) in results.items():
            self.timing[name].start_lag_s = started.start_lag_s
            self.timing[name].first_request_lag_s = started.first_request_lag_s
        documents = {name: doc for name, (doc, _) in results.items()}
        cold_docs = (hosts.each(cold_names, lambda agent, _: agent.stop_cold())
                     if cold is not None else {})
        # the server's samplers keep the scheduled start with the hot hosts; the cold hosts'
        # connections are open before it
        merged, facts = judged_merge(documents, dict(zip(hot_names, hot, strict=True)), clocks,
                                     sampler_host=server_name)
        return Measurement(merged, facts, _cold_held(cold_docs), window, edges,
                           measured.window, measured.stats_before, measured.stats_after,
                           measured.samples, measured.profile_rows)

    def _on_run_clock(self, name: str, edges: Edges) -> Edges:
        """Edges on host `name`'s time.time() as the run's host's clock reads them."""
        shift = round(self.timing[name].clock_offset_s * NS_PER_S)
        return Edges(edges.start_ns - shift, edges.end_ns - shift)

    def _shards(self, spec: LoadSpec, hosts: tuple[HostWorker, ...]) -> list[LoadSpec]:
        """spec split over hosts: each binds its own host's addresses, draws its own arrivals
        (a seed of its own) and may load the server's addresses, which the run checked its
        worker holds (harness.cluster.session), though the client host's machine does not."""
        shards = split(spec, len(hosts))
        if len(shards) < len(hosts):
            raise PointFailed(f"{len(hosts)} hosts share fewer connections than hosts; give "
                              f"each host at least one, or fewer hosts")
        return [dataclasses.replace(shard, source_addrs=list(hw.addresses), seed=self.seed + i,
                                    cluster_addresses=self.placement.server.addresses)
                for i, (shard, hw) in enumerate(zip(shards, hosts, strict=True))]

    def _keep_logs(self, name: str, logs: dict[str, bytes]) -> None:
        for relative, content in logs.items():
            path = self.raw / name / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)


def _furthest(counted: list[Edges], window: Window) -> Edges:
    """The hot hosts' generators as one source: each edge the one furthest from the window's
    (the disagreement a rule must see)."""
    return Edges(max((e.start_ns for e in counted), key=lambda t: abs(t - window.start_ns)),
                 max((e.end_ns for e in counted), key=lambda t: abs(t - window.end_ns)))


def _cold_held(documents: dict[str, dict[str, Any] | None]) -> int | None:
    """The cold connections every cold host's generator held to the end, from their
    documents merged; None without any."""
    kept = {name: doc for name, doc in documents.items() if doc is not None}
    return cold_held(merge_documents(kept)) if kept else None
