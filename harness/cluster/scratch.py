"""A Dask scheduler or worker of this machine, run with a scratch space of its own: a fresh
temporary directory (Dask's `temporary-directory`, set through its environment variable, which
the scheduler's command line has no option for), removed when the process ends. Dask's default is
one `dask-scratch-space` shared in the system temporary directory, which it leaves behind,
with its lock files, after the cluster stops."""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile

from harness.interrupts import STOP_SIGNALS
from harness.procs import die_with_parent, forwarding_signals

SCRATCH_ENV = "DASK_TEMPORARY_DIRECTORY"


def run_dask(argv: list[str], env: dict[str, str]) -> int:
    """Runs `dask scheduler` or `dask worker` (argv) until it ends, a stop signal passed on
    to it as SIGTERM (its clean close); its exit status, 128 + N when signal N ended it."""
    scratch = tempfile.mkdtemp(prefix="wanbench-dask-")
    try:
        with forwarding_signals(
                lambda: subprocess.Popen(argv, env={**env, SCRATCH_ENV: scratch},
                                         preexec_fn=die_with_parent),
                STOP_SIGNALS, send=signal.SIGTERM) as proc:
            status = proc.wait()
        return status if status >= 0 else 128 - status
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
