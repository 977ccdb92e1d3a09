"""A cluster worker's own target policy: the run sends load specs, never the right to leave
the allowed ranges. Whether this worker may load targets outside them is its own flag
(`wanbench worker --allow-any-target`, passed down as ALLOW_ENV), so a worker refuses such a
target even when the run asks (harness.cluster.agent applies it to every spec it runs). What
it takes from the run is which 198.18.0.0/15 addresses the run's hosts hold (a spec's
cluster_addresses, which the run checked by asking them): a client host's machine does not
hold its server's, and they never widen the rule beyond that range."""

from __future__ import annotations

import os

ALLOW_ENV = "WANBENCH_WORKER_ALLOW_ANY_TARGET"


def allowed_here() -> bool:
    return os.environ.get(ALLOW_ENV) == "1"
