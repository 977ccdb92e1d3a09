"""What a cluster worker runs: one generator shard, judged by the worker's own target policy.

The scheduler sends the spec's fields, never the right to leave the allowed ranges: whether
this worker may load targets outside them is its own flag (`wanbench worker
--allow-any-target`, passed down as ALLOW_ENV), so a worker refuses such a target even when
the run asks."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import clients
from clients.spec import LoadSpec

ALLOW_ENV = "WANBENCH_WORKER_ALLOW_ANY_TARGET"


def allowed_here() -> bool:
    return os.environ.get(ALLOW_ENV) == "1"


@dataclass
class ShardResult:
    """One shard's document and when it started by its host's clock."""

    host: str
    document: dict[str, Any]
    start_lag_s: float  # from the scheduled start to the generator's launch


def run_shard(fields: dict[str, Any], start_at: float) -> ShardResult:
    """Run the generator of fields (LoadSpec's) from start_at (the host's time.time()) on."""
    from distributed import get_worker  # a task: it runs inside a worker

    spec = LoadSpec(**{**fields, "allow_any_target": allowed_here()})
    spec.resolved_targets()  # raises TargetRefused before anything starts
    time.sleep(max(0.0, start_at - time.time()))
    lag = time.time() - start_at
    return ShardResult(str(get_worker().name), clients.run(spec), lag)
