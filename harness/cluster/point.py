"""One point × repetition across the cluster's hosts: the same phases as on one machine
(harness.runner.launch), each run by the agent of the host it belongs to, and the same
Measurement out.

  1. the server started on the server host (and checked, as on one machine);
  2. the cold connections opened on every cold host, then the server confirms it holds them
     all: the barrier before anything is measured;
  3. the clocks read; one scheduled start for every hot host's generator (each given the
     time its own clock reads then) and the server host's samplers (warm-up, then window);
  4. the hot documents merged exactly (clients.schema.merge_documents), a clock offset over
     the tolerance making the point invalid (clients.validity.clock_offset).
A worker that leaves the scheduler during any phase fails the point naming its host
(validity.worker_lost); every host's processes are stopped whatever happened."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clients import validity
from clients.schema import merge_documents
from clients.spec import LoadSpec
from harness.cluster.agent import HostAgent
from harness.cluster.coordinator import (
    START_MARGIN_S,
    WATCH_S,
    ClockOffset,
    clock_offsets,
    present_workers,
    split,
)
from harness.cluster.placement import HostWorker, Placement
from harness.runner.launch import GENERATOR_TAIL_S, Measurement
from harness.runner.load_side import HOT_FINISH_MARGIN_S, cold_spec, hot_spec
from harness.runner.processes import PointFailed
from harness.scenario import Scenario

STOP_TIMEOUT_S = 30.0
PHASE_TIMEOUT_S = 120.0  # a phase that does not end (start-up, cold ramp beyond it) fails
LEASE_MARGIN_S = 300.0
# A worker that cannot be reached is taken for lost if the scheduler says so within this
LOSS_NOTICE_S = 5.0  # an agent the run never stops stops itself this long after the point


@dataclass
class HostTiming:
    """How one host kept to the point's schedule (the manifest's cluster.points)."""

    clock_offset_s: float
    clock_uncertainty_s: float
    start_lag_s: float | None = None  # hot hosts: scheduled start to the generator's launch


class ClusterPoint:
    """Runs one point × repetition on the agents of placement's hosts; abort() from another
    thread stops it (the run was interrupted)."""

    def __init__(self, client: Any, placement: Placement, config: Scenario, seed: int,
                 raw: Path, on_event: Callable[[str], None]):
        self.client, self.placement, self.config, self.seed = client, placement, config, seed
        self.raw, self.on_event = raw, on_event
        self.agents: dict[str, Any] = {}  # worker name → its HostAgent (an actor handle)
        self.timing: dict[str, HostTiming] = {}  # worker name →
        self.aborted = threading.Event()
        self._stopping = threading.Lock()  # run()'s end and abort() may come together

    def run(self) -> Measurement:
        # the agents' handles find their client as the current one (in this thread)
        with self.client.as_current():
            try:
                return self._measure()
            finally:
                self._stop()

    def abort(self) -> None:
        self.aborted.set()
        with self.client.as_current():
            self._stop()

    # -- waiting on the hosts ----------------------------------------------------------------

    def _wait(self, calls: dict[str, Any], timeout_s: float = PHASE_TIMEOUT_S) -> dict[str, Any]:
        """Worker name → result of each call (a Dask future or actor future), or PointFailed:
        naming a worker of the point that left the scheduler, or the call that failed."""
        deadline = time.monotonic() + timeout_s
        while not all(call.done() for call in calls.values()):
            if self.aborted.is_set():
                raise PointFailed("the run was interrupted")
            self._check_present()
            if time.monotonic() > deadline:
                late = ", ".join(name for name, call in calls.items() if not call.done())
                raise PointFailed(f"{late}: no answer within {timeout_s:.0f} s")
            time.sleep(WATCH_S)
        results = {}
        for name, call in calls.items():
            try:
                results[name] = call.result()
            except PointFailed as exc:  # the host's own reason, named
                raise PointFailed(f"{name}: {exc}") from None
            except OSError as exc:  # its worker unreachable: lost, once the scheduler knows
                self._check_present(LOSS_NOTICE_S)
                raise PointFailed(f"{name}: {exc}") from None
            except Exception as exc:  # noqa: BLE001  # e.g. a target refused on that host
                raise PointFailed(f"{name}: {type(exc).__name__}: {exc}") from None
        return results

    def _check_present(self, within_s: float = 0.0) -> None:
        """PointFailed naming the first of the point's workers that left the scheduler, if
        one has or does within within_s."""
        deadline = time.monotonic() + within_s
        while True:
            present = present_workers(self.client)
            for hw in self.placement.hosts.values():
                if hw.worker not in present:
                    raise PointFailed(validity.worker_lost(
                        hw.name, f" (host {hw.host}: it left the scheduler)"), lost_host=hw.name)
            if time.monotonic() >= deadline:
                return
            time.sleep(WATCH_S)

    def _each(self, hosts: tuple[HostWorker, ...], call: Callable[[Any, int], Any],
              timeout_s: float = PHASE_TIMEOUT_S) -> dict[str, Any]:
        """call(agent, index) on every host at once, then their results."""
        return self._wait({hw.name: call(self.agents[hw.name], i) for i, hw in enumerate(hosts)},
                          timeout_s)

    # -- the phases --------------------------------------------------------------------------

    def _measure(self) -> Measurement:
        cfg, placement = self.config, self.placement
        hosts = tuple(placement.hosts.values())
        lease = LEASE_MARGIN_S + cfg.warmup_s + cfg.duration_s + cfg.cold.conns / cfg.cold.ramp_rps
        futures = {hw.name: self.client.submit(HostAgent, lease, actor=True, workers=[hw.worker],
                                               allow_other_workers=False, pure=False)
                   for hw in hosts}
        self.agents = self._wait(futures)
        server = self.agents[placement.server.name]
        target = self._wait({placement.server.name: server.start_server(
            cfg, placement.server.addresses[0])})[placement.server.name]
        cold = cold_spec(cfg, self.seed, target, None, None)
        if cold is not None:
            shards = self._shards(cold, placement.cold)
            self._each(placement.cold, lambda agent, i: agent.start_cold(shards[i]),
                       PHASE_TIMEOUT_S + cold.cold_conns / cold.cold_ramp_rps)
            self._wait({placement.server.name: server.confirm_held(cold.cold_conns)})
            self.on_event(f"{cold.cold_conns} cold connections established on "
                          f"{len(shards)} host(s)")
        self._wait({placement.server.name: server.hold_to_budget()})
        clocks = clock_offsets(self.client, {hw.worker: hw.name for hw in hosts})
        self.timing = {name: HostTiming(c.offset_s, c.uncertainty_s) for name, c in clocks.items()}
        hot = self._shards(hot_spec(cfg, self.seed, target, None, None), placement.hot)
        start_at = time.time() + START_MARGIN_S
        # each host is given the time its own clock reads at the scheduled start
        self._each(placement.hot, lambda agent, i: agent.start_hot(
            hot[i], start_at + clocks[placement.hot[i].name].offset_s))
        window = server.measure(start_at + clocks[placement.server.name].offset_s, cfg.warmup_s,
                                cfg.warmup_s + cfg.duration_s - GENERATOR_TAIL_S)
        run_s = START_MARGIN_S + cfg.warmup_s + cfg.duration_s + HOT_FINISH_MARGIN_S
        results = self._each(placement.hot, lambda agent, _: agent.hot_result(), run_s)
        measured = self._wait({placement.server.name: window})[placement.server.name]
        for name, (_, started) in results.items():
            self.timing[name].start_lag_s = started.start_lag_s
        documents = {name: doc for name, (doc, _) in results.items()}
        cold_docs = (self._each(placement.cold, lambda agent, _: agent.stop_cold())
                     if cold is not None else {})
        return Measurement(self._merged(documents, clocks), _merged_cold(cold_docs),
                           measured.window, measured.stats_before, measured.stats_after,
                           measured.samples, measured.profile_rows)

    def _shards(self, spec: LoadSpec, hosts: tuple[HostWorker, ...]) -> list[LoadSpec]:
        """spec split over hosts: each binds its own host's addresses and draws its own
        arrivals (a seed of its own)."""
        shards = split(spec, len(hosts))
        if len(shards) < len(hosts):
            raise PointFailed(f"{len(hosts)} hosts share fewer connections than hosts; give "
                              f"each host at least one, or fewer hosts")
        return [dataclasses.replace(shard, source_addrs=list(hw.addresses), seed=self.seed + i)
                for i, (shard, hw) in enumerate(zip(shards, hosts, strict=True))]

    def _merged(self, documents: dict[str, dict[str, Any]],
                clocks: dict[str, ClockOffset]) -> dict[str, Any]:
        """The hot documents as one; the clocks of the hosts that kept the scheduled start
        (the hot hosts and the server's samplers) judged, not the cold hosts', which only
        hold their connections from before it."""
        merged = merge_documents(documents)
        window = self.config.duration_s
        scheduled = {hw.name for hw in (self.placement.server, *self.placement.hot)}
        reasons = [validity.clock_offset(name, clock.offset_s, clock.uncertainty_s, window)
                   for name, clock in clocks.items() if name in scheduled]
        merged["invalid_reasons"] += [r for r in reasons if r]
        merged["valid"] = not merged["invalid_reasons"]
        return merged

    # -- the end -----------------------------------------------------------------------------

    def _stop(self) -> None:
        """Every host's processes stopped (an agent on a lost worker is gone with them), its
        logs kept under raw/WORKER/."""
        with self._stopping:
            self._stop_agents()

    def _stop_agents(self) -> None:
        present = present_workers(self.client)
        alive = {hw.name: self.agents[hw.name] for hw in self.placement.hosts.values()
                 if hw.name in self.agents and hw.worker in present}
        for name, agent in alive.items():
            try:
                self._keep_logs(name, agent.logs().result(timeout=STOP_TIMEOUT_S))
            except Exception as exc:  # noqa: BLE001  # the stop below matters more
                self.on_event(f"{name}: its logs could not be fetched ({exc})")
        stops = {name: agent.stop() for name, agent in alive.items()}
        for name, stop in stops.items():
            try:
                stop.result(timeout=STOP_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001  # say which host may hold processes
                self.on_event(f"{name}: could not be told to stop ({exc}); its agent stops "
                              f"itself within {LEASE_MARGIN_S:.0f} s")
        self.agents = {}

    def _keep_logs(self, name: str, logs: dict[str, bytes]) -> None:
        for relative, content in logs.items():
            path = self.raw / name / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)


def _merged_cold(documents: dict[str, dict[str, Any] | None]) -> dict[str, Any] | None:
    kept = {name: doc for name, doc in documents.items() if doc is not None}
    return merge_documents(kept) if kept else None
