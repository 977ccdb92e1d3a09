"""Pinning a command to one CPU from outside it: the one place the `taskset` prefix is written.

For programs without an affinity option of their own: the external load tools (wrk,
httperf) and servers the runner starts by command (nginx). wb-server, wb-sclient and
asyncgen pin themselves (--cpu)."""

from __future__ import annotations


def pin_argv(cpu: int | None) -> list[str]:
    """The argv prefix that runs a command on CPU `cpu`; nothing when cpu is None."""
    return [] if cpu is None else ["taskset", "-c", str(cpu)]
