"""Several hosts through Dask distributed: hosts join a scheduler as workers
whose resources name their role; a load (`wanbench load --cluster`) or a scenario (`wanbench
run --cluster`) runs on them.

Only the cluster path imports `distributed` (the `cluster` extra); single-box runs never do.
- roles: what a worker may be and the Dask resource that says so;
- security: who may use the cluster (TLS with the cluster's own CA; `wanbench cluster certs`),
  and the one address each of its processes listens on;
- targets: a worker's own target policy, which the run cannot widen;
- agent: what runs on a worker (a Dask actor holding that host's server or generators);
- hosts: the agents of one measurement, their calls awaited while watching for lost workers;
- coordinator: reachability, clock offsets, the split of a spec, `wanbench load --cluster`;
- placement, point, session, run: `wanbench run --cluster` (which worker stands for which
  topology host, one point's phases, the run's checks and manifest block, the hosts the
  runner's run joins and its child entry `python -m harness.cluster.run`);
- namespaces: a cluster of network namespaces on one machine (tests, benchmark).
"""


class ClusterError(RuntimeError):
    """The cluster cannot run what was asked; the message names the fix."""
