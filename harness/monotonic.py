"""CLOCK_MONOTONIC, the clock every window is decided on (harness.runner.window) and every
source reads its edges by: waiting for an instant of it, or at most a while, from any layer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import TypeVar

NS_PER_S = 1_000_000_000
# The last stretch before an instant is slept by the thread, the event loop held: asyncio's
# timers wake on epoll_wait's millisecond ticks and then after whatever else the loop has
# ready at that moment (at a window's end, the tracers' replies), so a source read "at" the
# edge read it milliseconds after; a thread's sleep ends on a high-resolution timer. Slept,
# not spun: the runner may share the server's CPU, and the edge is when the server works.
HOLD_NS = 2_000_000
T = TypeVar("T")


async def sleep_until(instant_ns: int) -> None:
    """Until this host's CLOCK_MONOTONIC reads instant_ns (at once if it has), its last
    HOLD_NS with the loop held: what follows the call runs at the instant, before the loop's
    other work."""
    ahead_ns = instant_ns - HOLD_NS - time.monotonic_ns()
    if ahead_ns > 0:
        await asyncio.sleep(ahead_ns / NS_PER_S)
    left_ns = instant_ns - time.monotonic_ns()
    if left_ns > 0:
        time.sleep(left_ns / NS_PER_S)


async def within(awaitable: Awaitable[T], timeout_s: float | None) -> T:
    """awaitable's result; TimeoutError after timeout_s (None: no limit). Not asyncio.wait_for:
    on Python 3.11 a cancellation that comes as the awaited one finishes (the run's stop
    signal, as a server answers) is dropped and the result returned, and the run goes on with
    its stop spent. Awaited here, a cancellation is raised at the next step whatever else
    finished."""
    async with asyncio.timeout(timeout_s):
        return await awaitable
