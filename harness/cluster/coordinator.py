"""The run's side of a cluster: the scheduler reached (or a clear error), the workers of a
role found, their clock offsets measured, a spec split over them, their shards started at one
scheduled time and their documents merged (clients.schema.merge_documents)."""

from __future__ import annotations

import dataclasses
import functools
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from clients import namespaces, validity
from clients.schema import merge_documents
from clients.spec import LoadSpec, sclient_sockets
from clients.targets import BENCHMARK_NET, resolve, split_host_port
from clients.validity import ClockOffset
from harness.cluster import ClusterError
from harness.cluster.agent import HotStart
from harness.cluster.hosts import HostAgents, present_workers
from harness.cluster.roles import roles_of
from harness.cluster.security import Access
from harness.runner.processes import PointFailed

# Time every shard has to receive its task before the scheduled start (one round trip to the
# scheduler and one to the worker, with room for a loaded host)
START_MARGIN_S = 1.0
# A shard not finished this long after its window ended is given up (its host named)
FINISH_MARGIN_S = 60.0


@dataclass
class ClusterLoad:
    """A spec's shards run on the workers of one role and their merged document."""

    document: dict[str, Any]
    shards: dict[str, dict[str, Any]]  # host -> its document
    started: dict[str, HotStart]  # host -> how late its generator launched and first sent
    clocks: dict[str, ClockOffset]


# A Client retries a refused connection until its timeout: a first try this long, and only
# if it fails, a look at whether anything listens there (a look that reaches a live scheduler
# costs it a "TLS handshake failed" warning in its log, so none is taken when the first try
# got through)
FIRST_TRY_S = 1.0


def refused(address: str, timeout_s: float) -> bool:
    """Whether the scheduler's host refused a connection: nothing listens there now. A host
    that does not answer is not refused: the Client's own wait says so."""
    where = urlsplit(address)
    if where.hostname is None or where.port is None:
        return False  # Dask's default port, or no address at all: the Client's to say
    try:
        socket.create_connection((where.hostname, where.port), timeout=timeout_s).close()
    except ConnectionRefusedError:
        return True
    except OSError:
        pass
    return False


@functools.cache
def _client_type() -> type:
    """distributed.Client, but one whose start that fails stops the IO-loop thread it started
    (a Client that could not connect leaves it running: one more thread a try). Made on first
    use: the cluster extra, which single-box runs never import."""
    from distributed import Client

    class StoppedIfUnstarted(Client):
        def start(self, **kwargs: Any) -> None:
            try:
                super().start(**kwargs)
            except BaseException:
                self._loop_runner.stop()
                raise

    return StoppedIfUnstarted


def connect(access: Access, timeout_s: float = 5.0) -> Any:
    """A distributed.Client to the scheduler, proving itself with the cluster's certificate
    (harness.cluster.security), or ClusterError before anything starts."""
    Client = _client_type()  # noqa: N806 - distributed's class, as its users name it
    start_it = ("start it (`wanbench cluster scheduler --certs DIR --host ADDR`) and give its "
                "tls://ADDR:PORT with the certificates it was started with")
    security = access.certs.security() if access.certs else None

    def client(within_s: float) -> Any:
        return Client(access.address, timeout=within_s, set_as_default=False,
                      security=security)

    first_try = min(FIRST_TRY_S, timeout_s)
    try:
        return client(first_try)
    except (OSError, TimeoutError, ValueError) as exc:
        failed = exc
    if refused(access.address, first_try):
        raise ClusterError(f"the scheduler {access.address} did not answer: nothing listens "
                           f"there (connection refused): {start_it}")
    if timeout_s > first_try:
        try:
            return client(timeout_s - first_try)
        except (OSError, TimeoutError, ValueError) as exc:
            failed = exc
    raise ClusterError(f"the scheduler {access.address} did not answer within {timeout_s:g} s "
                       f"({failed}): {start_it}")


def connect_started(access: Access, timeout_s: float) -> Any:
    """connect() to a scheduler started a moment ago: its port is given timeout_s to listen."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return connect(access, FIRST_TRY_S)
        except ClusterError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


def workers_of(client: Any, role: str) -> dict[str, str]:
    """Worker address -> name for the workers that hold role's resource."""
    found = {address: str(info.get("name", address))
             for address, info in present_workers(client).items()
             if role in roles_of(info.get("resources") or {})}
    if not found:
        raise ClusterError(f"no worker of role {role!r} joined the scheduler: start one with "
                           f"`wanbench worker --role {role} --scheduler ADDR`")
    return dict(sorted(found.items(), key=lambda item: item[1]))


def clock_offsets(client: Any, workers: dict[str, str]) -> dict[str, ClockOffset]:
    offsets = {}
    for address, name in workers.items():
        # a first exchange opens the connections on the way (a TLS handshake each), so that
        # the measured one is a round trip only
        client.run(time.time, workers=[address])
        before = time.time()
        theirs = client.run(time.time, workers=[address])[address]
        after = time.time()
        offsets[name] = ClockOffset(theirs - (before + after) / 2, (after - before) / 2)
    return offsets


def _share(total: int, parts: int, index: int) -> int:
    return total // parts + (index < total % parts)


def _part(value: float | None, share: int, total: int) -> float | None:
    """A rate's part for share of total connections; None when it has none."""
    return value * share / total if value and share else None


def split(spec: LoadSpec, parts: int) -> list[LoadSpec]:
    """The spec's connections spread as evenly as they go over at most `parts` shards, each
    offering the part of the rate (or stream bandwidth) its connections carry. An S-Client's
    shard keeps the sockets its part of the rate needs (sclient_sockets: its Poisson margin
    does not divide with the rate)."""
    parts = min(parts, max(spec.hot_conns, spec.cold_conns, spec.stream_conns))
    shards = []
    for i in range(parts):
        hot = _share(spec.hot_conns, parts, i)
        stream = _share(spec.stream_conns, parts, i)
        rate = _part(spec.rate_rps, hot, spec.hot_conns)
        sockets = (max(hot, sclient_sockets(rate, spec.connect_timeout_s,
                                            spec.response_timeout_s))
                   if spec.overload == "sclient" and rate else hot)
        shards.append(dataclasses.replace(
            spec, hot_conns=sockets, rate_rps=rate,
            cold_conns=_share(spec.cold_conns, parts, i), stream_conns=stream,
            stream_mbps=_part(spec.stream_mbps, stream, spec.stream_conns), json_path=None))
    return shards


def hosts_holding(client: Any, addresses: list[str]) -> tuple[str, ...]:
    """Those of these IPv4 addresses that some worker's machine holds (in a network namespace
    there, clients.namespaces.held, asked of every worker)."""
    answers = client.run(namespaces.held, addresses) if addresses else {}
    return tuple(sorted({address for found in answers.values() for address in found}))


def vouched(client: Any, spec: LoadSpec) -> LoadSpec:
    """spec with its 198.18.0.0/15 targets that the cluster's hosts hold as its
    cluster_addresses: the run's own hosts, which the target rule allows though this machine
    holds none of them (clients.targets.check_target)."""
    addresses = {resolve(split_host_port(target)[0]) for target in spec.targets}
    wanted = sorted(str(a) for a in addresses if a.version == 4 and a in BENCHMARK_NET)
    return dataclasses.replace(spec, cluster_addresses=hosts_holding(client, wanted))


def judged_merge(documents: dict[str, dict[str, Any]], specs: dict[str, LoadSpec],
                 clocks: dict[str, ClockOffset],
                 sampler_host: str | None = None) -> tuple[dict[str, Any], validity.Facts]:
    """The shards' documents (host -> its document, run as specs[host] asked) as one
    (clients.schema.merge_documents) with the verdict of clients.validity on each shard's
    facts and the hosts' clocks; and those facts, which a point's recorder judges again
    with its samplers'. sampler_host: a host that keeps the scheduled start beside the
    shards' (a cluster point's server)."""
    facts = validity.Facts({host: specs[host].facts(doc)
                            for host, doc in documents.items()}, clocks, sampler_host)
    return {**merge_documents(documents), **validity.judge(facts).document_fields()}, facts


def run_load(client: Any, spec: LoadSpec, role: str,
             on_event: Callable[[str], None] = lambda _: None) -> ClusterLoad:
    """spec split over the workers of role, started at one time on all of them; a worker
    that is lost or fails makes ClusterError naming it, its peers' generators stopped. A
    target outside the rule is refused (TargetRefused) before any worker starts."""
    spec = vouched(client, spec)
    spec.resolved_targets()
    workers = workers_of(client, role)
    clocks = clock_offsets(client, workers)
    shards = split(spec, len(workers))
    placed = {name: address for address, name in list(workers.items())[:len(shards)]}
    names = list(placed)
    hosts = HostAgents(client, placed, lambda _: "")
    with client.as_current():  # the agents' handles find their client so
        try:
            hosts.start(spec.warmup_s + spec.duration_s)
            start_at = time.time() + START_MARGIN_S
            # each host is given the time its own clock reads at the scheduled start
            hosts.each(names, lambda agent, i: agent.start_hot(
                shards[i], start_at + clocks[names[i]].offset_s))
            results = hosts.each(names, lambda agent, _: agent.hot_result(),
                                 START_MARGIN_S + spec.warmup_s + spec.duration_s
                                 + FINISH_MARGIN_S)
        except PointFailed as exc:
            raise ClusterError(str(exc)) from None
        finally:
            hosts.stop(None, on_event)
    documents = {name: document for name, (document, _) in results.items()}
    merged, _ = judged_merge(documents, dict(zip(names, shards, strict=True)), clocks)
    return ClusterLoad(merged, documents,
                       {name: started for name, (_, started) in results.items()},
                       clocks)
