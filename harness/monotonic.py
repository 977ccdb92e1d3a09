"""CLOCK_MONOTONIC, the clock every window is decided on (harness.runner.window) and every
source reads its edges by: waiting for an instant of it, or at most a while, from any layer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import TypeVar

NS_PER_S = 1_000_000_000
# The last stretch before an instant is spun, not slept: asyncio's timers wake on
# epoll_wait's millisecond ticks, then after an idle vCPU's wake-up, and then after whatever
# else the loop has ready at that moment (at a window's end, the tracers' replies), so a
# source read "at" the edge read it milliseconds after.
SPIN_NS = 2_000_000
T = TypeVar("T")


async def sleep_until(instant_ns: int) -> None:
    """Until this host's CLOCK_MONOTONIC reads instant_ns (at once if it has), its last
    SPIN_NS spun: what follows the call runs at the instant, before the loop's other work."""
    ahead_ns = instant_ns - SPIN_NS - time.monotonic_ns()
    if ahead_ns > 0:
        await asyncio.sleep(ahead_ns / NS_PER_S)
    while time.monotonic_ns() < instant_ns:
        pass


async def within(awaitable: Awaitable[T], timeout_s: float | None) -> T:
    """awaitable's result; TimeoutError after timeout_s (None: no limit). Not asyncio.wait_for:
    on Python 3.11 a cancellation that comes as the awaited one finishes (the run's stop
    signal, as a server answers) is dropped and the result returned, and the run goes on with
    its stop spent. Awaited here, a cancellation is raised at the next step whatever else
    finished."""
    async with asyncio.timeout(timeout_s):
        return await awaitable
