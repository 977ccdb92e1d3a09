"""A scenario run across the cluster: its hosts checked before anything starts (a worker for
every topology host the run uses, each holding its host's addresses), described for the
manifest, and its points measured by ClusterPoint (harness.runner.run's point source)."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

from clients.paths import MissingBinary
from harness import manifest
from harness.cluster import ClusterError
from harness.cluster.agent import missing_addresses
from harness.cluster.coordinator import present_workers
from harness.cluster.placement import Placement, place
from harness.cluster.point import ClusterPoint
from harness.cluster.roles import roles_of
from harness.results.store import RunDir
from harness.runner.context import RunContext
from harness.runner.launch import Measurement
from harness.runner.load_side import seed_of
from harness.runner.run import MissingTool, preflight
from harness.scenario import Point, Scenario, points
from harness.topology import load_topology
from harness.topology.model import TopologyError

# What the manifest keeps of each host's description (harness.manifest.collect)
HOST_FIELDS = ("hostname", "kernel", "cpu", "tools", "git_revision", "loadavg_at_start")


def placements(client: Any, scenario: Scenario, scenario_dir: Path) -> dict[str, Placement]:
    """Topology key → where its points run; ClusterError naming the fix when a host the run
    uses has no worker, or its worker does not hold the host's addresses."""
    workers = {address: (str(info.get("name", address)), roles_of(info.get("resources") or {}))
               for address, info in present_workers(client).items()}
    if not workers:
        raise ClusterError("no worker joined the scheduler: start one per host with "
                           "`wanbench worker --scheduler tls://HOST:PORT --certs DIR --role ROLE`")
    found: dict[str, Placement] = {}
    grid = points(scenario)
    for point in grid:
        key = point.topology_key
        if key in found:
            continue
        ref = point.config.topology
        try:
            topology = load_topology(ref.path(scenario_dir), dict(ref.set) or None)
            needs_cold = any(p.config.cold.conns for p in grid if p.topology_key == key)
            found[key] = place(topology, workers, needs_cold)
        except TopologyError as exc:
            raise ClusterError(str(exc)) from None
        _check_hosts(client, found[key], scenario)
    return found


def _check_hosts(client: Any, placement: Placement, scenario: Scenario) -> None:
    """Each host has what the scenario runs (harness.runner.run.preflight, run there) and
    holds its topology host's addresses."""
    for hw in placement.hosts.values():
        try:
            client.run(preflight, scenario, workers=[hw.worker])
        except (MissingBinary, MissingTool) as exc:
            raise ClusterError(f"worker {hw.name}: {exc}") from None
        missing = client.run(missing_addresses, list(hw.addresses), workers=[hw.worker])
        missing = missing[hw.worker]
        if missing:
            raise ClusterError(
                f"worker {hw.name} stands for topology host {hw.host} but its machine does not "
                f"hold {', '.join(missing)}: add them there (`ip addr add ADDR/24 dev IFACE`), "
                f"or start its worker on the machine that holds them")


def describe(client: Any, scheduler: str, found: dict[str, Placement]) -> dict[str, Any]:
    """The manifest's cluster block: the scheduler and every host (as the run's own machine
    is described), and the hosts' timing per point, filled in as points run."""
    hosts: dict[str, Any] = {}
    unused: set[str] = set()
    for placement in found.values():
        unused |= set(placement.unused)
        for hw in placement.hosts.values():
            if hw.name not in hosts:
                about = client.run(manifest.collect, workers=[hw.worker])[hw.worker]
                hosts[hw.name] = {"stands_for": hw.host, "role": hw.role, "worker": hw.worker,
                                  "addresses": list(hw.addresses),
                                  **{k: about.get(k) for k in HOST_FIELDS}}
    unused -= set(hosts)
    return {"scheduler": scheduler, "hosts": hosts, "unused_workers": sorted(unused),
            "points": {}}


class ClusterPoints:
    """Measures each point × repetition across the cluster (in a thread: Dask's client is
    synchronous); an interrupted point stops every host's processes before it returns."""

    def __init__(self, ctx: RunContext, client: Any, found: dict[str, Placement]):
        self.ctx, self.client, self.found = ctx, client, found

    async def measure(self, point: Point, repetition: int, attempt: int) -> Measurement:
        raw = self.ctx.raw_dir(point, repetition, attempt)
        cluster_point = ClusterPoint(self.client, self.found[point.topology_key], point.config,
                                     seed_of(point, repetition), raw, self.ctx.on_event)
        try:
            return await asyncio.to_thread(cluster_point.run)
        except asyncio.CancelledError:
            await asyncio.to_thread(cluster_point.abort)
            raise
        finally:
            name = RunDir.record_name(point.point_id, repetition)
            self.ctx.cluster["points"][f"{name}/{attempt}" if attempt else name] = {
                host: dataclasses.asdict(t) for host, t in cluster_point.timing.items()}

    async def close(self) -> None:
        """Nothing stays up between points: each point's agents are stopped with it (a
        scenario's hold_server_across_hot is not applied across a cluster)."""
