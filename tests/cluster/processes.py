"""The cluster tests' scheduler and workers, stopped whatever the test did."""

from __future__ import annotations

import subprocess


def stop_all(procs: list[subprocess.Popen]) -> None:
    """SIGTERM each (workers before their scheduler), then SIGKILL what outlives 10 s."""
    for proc in reversed(procs):
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
