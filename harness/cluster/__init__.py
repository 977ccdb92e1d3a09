"""Several hosts through Dask distributed (issue #17): hosts join a scheduler as workers
whose resources name their role, and the run places generator shards on them.

Only the cluster path imports `distributed` (the `cluster` extra); single-box runs never do.
- roles: what a worker may be and the Dask resource that says so;
- shard: what runs on a worker (one generator shard, behind the worker's own target check);
- coordinator: what runs beside the scheduler's client (reachability, clock offsets, the
  split of a spec over the role's workers, their documents gathered and merged).
"""


class ClusterError(RuntimeError):
    """The cluster cannot run what was asked; the message names the fix."""
