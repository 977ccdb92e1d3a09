"""A cluster worker's own target policy: the run sends load specs, never the right to leave
the allowed ranges. Whether this worker may load targets outside them is its own flag
(`wanbench worker --allow-any-target`, passed down as ALLOW_ENV), so a worker refuses such a
target even when the run asks (harness.cluster.agent applies it to every spec it runs)."""

from __future__ import annotations

import os

ALLOW_ENV = "WANBENCH_WORKER_ALLOW_ANY_TARGET"


def allowed_here() -> bool:
    return os.environ.get(ALLOW_ENV) == "1"
