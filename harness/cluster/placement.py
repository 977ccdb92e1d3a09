"""Which worker stands for which host of the topology, and the addresses it uses there.

A worker stands for the topology host its role names, else for the next host of the role it
names (server, hot, cold), in the order of the topology's hosts and the workers' names. One
worker per host: a topology host is one machine, holding the host's addresses
(harness.topology.addressing.host_addresses), which its generators bind."""

from __future__ import annotations

from dataclasses import dataclass

from harness.cluster import ClusterError
from harness.topology.addressing import host_addresses
from harness.topology.model import Topology


@dataclass(frozen=True)
class HostWorker:
    host: str  # the topology host it stands for
    role: str  # that host's role in the topology
    worker: str  # the worker's address at the scheduler
    name: str  # the worker's name
    addresses: tuple[str, ...]  # the host's, first the one others reach it at


@dataclass(frozen=True)
class Placement:
    server: HostWorker
    hot: tuple[HostWorker, ...]  # the hot (or stream) load is split over these
    cold: tuple[HostWorker, ...]  # the cold connections are split over these
    unused: tuple[str, ...]  # names of workers that stand for no host

    @property
    def hosts(self) -> dict[str, HostWorker]:
        """Topology host → its worker, for every host the point uses."""
        return {hw.host: hw for hw in (self.server, *self.hot, *self.cold)}


def place(topology: Topology, workers: dict[str, tuple[str, list[str]]],
          needs_cold: bool) -> Placement:
    """workers: address → (name, roles). The hosts a point uses (the server, the hot hosts,
    the cold ones when it opens cold connections) each get their worker, or ClusterError
    naming the host and how to start its worker."""
    addresses = host_addresses(topology)
    by_name = sorted(workers.items(), key=lambda item: item[1][0])
    taken: dict[str, HostWorker] = {}
    for host in topology.hosts:  # a worker named by its host's name first
        named = [(a, name) for a, (name, roles) in by_name if host in roles]
        if len(named) > 1:
            raise ClusterError(f"workers {', '.join(n for _, n in named)} all stand for topology "
                               f"host {host!r}: a host is one machine; stop all but one")
        if named:
            taken[host] = _stand(topology, host, *named[0], addresses)
    used = {hw.worker for hw in taken.values()}
    for host, spec in topology.hosts.items():  # then by role, in order
        if host in taken:
            continue
        free = [(a, name) for a, (name, roles) in by_name
                if a not in used and spec.role in roles]
        if free:
            taken[host] = _stand(topology, host, *free[0], addresses)
            used.add(free[0][0])
    hot = topology.client_hosts("hot")
    cold = topology.client_hosts("cold") if needs_cold else []
    servers = topology.role_hosts("server")
    needed = [*servers[:1], *hot, *cold]
    for host in needed:
        if host not in taken:
            role = topology.hosts[host].role
            raise ClusterError(
                f"no worker stands for topology host {host!r} (role {role}, address "
                f"{addresses[host][0]}): on the machine holding that address run `wanbench "
                f"worker --scheduler tls://HOST:PORT --certs DIR --role {role}` (or --role {host})")
    return Placement(taken[servers[0]], tuple(taken[h] for h in hot),
                     tuple(taken[h] for h in cold),
                     tuple(name for a, (name, _) in by_name if a not in used))


def _stand(topology: Topology, host: str, address: str, name: str,
           addresses: dict[str, tuple[str, ...]]) -> HostWorker:
    return HostWorker(host, topology.hosts[host].role, address, name, addresses[host])
