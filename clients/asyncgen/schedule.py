"""The open loop: intended send times at the offered rate, fixed or Poisson, each handed on
when due; how late each went out is what `late_sends` and the slip report."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from clients.asyncgen.context import Context, now_ns


async def schedule(ctx: Context, offer: Callable[[int], None]) -> None:
    a, c = ctx.args, ctx.c
    seq, end = 0.0, min(ctx.window_end, 2**62)
    while not ctx.stop.is_set():
        intended = ctx.start + int(seq * 1e9)
        if intended >= end:
            return
        delay = (intended - now_ns()) / 1e9
        if delay > 0:
            await asyncio.sleep(delay)
        slip = now_ns() - intended
        if ctx.in_window(intended):
            c.scheduled += 1
            c.late += slip > ctx.late_ns
            c.max_slip_ns = max(c.max_slip_ns, slip)
        offer(intended)
        seq += ctx.rng.expovariate(a.rate_rps) if a.arrivals == "poisson" else 1 / a.rate_rps
