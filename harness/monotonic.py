"""CLOCK_MONOTONIC, the clock every window is decided on (harness.runner.window) and every
source reads its edges by: waiting for an instant of it, from any layer."""

from __future__ import annotations

import asyncio
import time

NS_PER_S = 1_000_000_000


async def sleep_until(instant_ns: int) -> None:
    """Until this host's CLOCK_MONOTONIC reads instant_ns (at once if it has)."""
    await asyncio.sleep(max(0, instant_ns - time.monotonic_ns()) / NS_PER_S)
