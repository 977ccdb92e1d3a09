"""The run's side of a cluster: the scheduler reached (or a clear error), the workers of a
role found, their clock offsets measured, a spec split over them, their shards started at one
scheduled time and their documents merged (clients.schema.merge_documents)."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from clients import validity
from clients.schema import merge_documents
from clients.spec import LoadSpec
from harness.cluster import ClusterError
from harness.cluster.roles import resource, roles_of
from harness.cluster.shard import ShardResult, run_shard

# Time every shard has to receive its task before the scheduled start (one round trip to the
# scheduler and one to the worker, with room for a loaded host)
START_MARGIN_S = 1.0
# A shard not finished this long after its window ended is given up (its host named)
FINISH_MARGIN_S = 60.0
WATCH_S = 0.5  # how often the run looks for workers that left


@dataclass
class ClockOffset:
    """A worker's clock less this host's, from one time exchange: the worker's reading is
    taken halfway through the round trip, give or take half of it (uncertainty_s)."""

    offset_s: float
    uncertainty_s: float


@dataclass
class ClusterLoad:
    """A spec's shards run on the workers of one role and their merged document."""

    document: dict[str, Any]
    shards: dict[str, dict[str, Any]]  # host -> its document
    start_lag_s: dict[str, float]  # host -> from the scheduled start to its generator's launch
    clocks: dict[str, ClockOffset]


def connect(address: str, timeout_s: float = 5.0) -> Any:
    """A distributed.Client to the scheduler at address, or ClusterError before anything
    starts."""
    from distributed import Client  # the cluster extra: single-box runs never import it

    try:
        return Client(address, timeout=timeout_s, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise ClusterError(f"the scheduler {address} did not answer within {timeout_s:g} s "
                           f"({exc}): start it (`dask scheduler --host ADDR --port PORT`) and "
                           f"give its tcp://ADDR:PORT") from None


def present_workers(client: Any) -> dict[str, dict[str, Any]]:
    """Worker address -> its info, asked of the scheduler now. Not client.scheduler_info():
    the client's periodic refresh replaces the identity it returns with one that lists no
    worker, so a worker could seem to have left."""
    return client.sync(client.scheduler.identity, n_workers=-1)["workers"]


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
    offering the part of the rate (or stream bandwidth) its connections carry."""
    parts = min(parts, max(spec.hot_conns, spec.cold_conns, spec.stream_conns))
    shards = []
    for i in range(parts):
        hot = _share(spec.hot_conns, parts, i)
        stream = _share(spec.stream_conns, parts, i)
        shards.append(dataclasses.replace(
            spec, hot_conns=hot, rate_rps=_part(spec.rate_rps, hot, spec.hot_conns),
            cold_conns=_share(spec.cold_conns, parts, i), stream_conns=stream,
            stream_mbps=_part(spec.stream_mbps, stream, spec.stream_conns), json_path=None))
    return shards


def run_load(client: Any, spec: LoadSpec, role: str) -> ClusterLoad:
    """spec split over the workers of role, started at one time on all of them; a worker
    that is lost or fails makes ClusterError naming it, its peers' tasks cancelled."""
    workers = workers_of(client, role)
    clocks = clock_offsets(client, workers)
    shards = split(spec, len(workers))
    start_at = time.time() + START_MARGIN_S
    futures = {}
    for (address, name), shard in zip(workers.items(), shards, strict=False):
        fields = {f.name: getattr(shard, f.name) for f in dataclasses.fields(shard)}
        # the worker's clock reads the start later or earlier by its offset
        futures[name] = client.submit(run_shard, fields, start_at + clocks[name].offset_s,
                                      workers=[address], allow_other_workers=False,
                                      resources={resource(role): 1}, pure=False)
    placed = dict(zip(futures, workers, strict=False))  # name -> address
    lost = _watch(client, futures, placed,
                  START_MARGIN_S + spec.warmup_s + spec.duration_s + FINISH_MARGIN_S)
    problems = _problems(futures, lost)
    if problems:
        client.cancel(list(futures.values()))
        raise ClusterError("; ".join(problems))
    results: dict[str, ShardResult] = {name: future.result() for name, future in futures.items()}
    documents = {name: result.document for name, result in results.items()}
    window = spec.duration_s
    merged = merge_documents(documents)
    clock_reasons = [validity.clock_offset(name, c.offset_s, c.uncertainty_s, window)
                     for name, c in clocks.items() if name in documents]
    merged["invalid_reasons"] += [r for r in clock_reasons if r]
    merged["valid"] = not merged["invalid_reasons"]
    return ClusterLoad(merged, documents, {n: r.start_lag_s for n, r in results.items()}, clocks)


def _watch(client: Any, futures: dict[str, Any], placed: dict[str, str],
           timeout_s: float) -> list[str]:
    """Wait until every shard finished, one failed, a worker left the scheduler or the time
    ran out; the names of the workers that left with their shard unfinished."""
    from distributed import wait

    deadline = time.monotonic() + timeout_s
    with client.as_current():  # wait() asks for the current client
        while time.monotonic() < deadline:
            pending = [f for f in futures.values() if not f.done()]
            if not pending or any(f.status == "error" for f in futures.values()):
                return []
            present = present_workers(client)
            lost = [name for name, address in placed.items()
                    if address not in present and not futures[name].done()]
            if lost:
                return lost
            with contextlib.suppress(TimeoutError):
                wait(pending, timeout=WATCH_S, return_when="FIRST_COMPLETED")
    return []


def _problems(futures: dict[str, Any], lost: list[str]) -> list[str]:
    """Why the shards did not all finish: the errors the failed ones raised, the workers
    that were lost, else those whose shard did not finish in time."""
    errors = [f"{name}: {future.exception()}" for name, future in futures.items()
              if future.status == "error"]
    return errors or [validity.worker_lost(name, " (it left the scheduler)") for name in lost] \
        or [validity.worker_lost(name, " (its shard did not finish in time)")
            for name, future in futures.items() if future.status != "finished"]
