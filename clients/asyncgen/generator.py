"""One asyncio generator run: start the hot and cold connections and the schedule, wait
out the warm-up and the measured window (or a signal), stop, and report."""

from __future__ import annotations

import argparse
import resource
from typing import Any

from clients.asyncgen.cold import ColdConnections
from clients.asyncgen.context import Context, now_ns
from clients.asyncgen.hot import HotConnections
from clients.asyncgen.report import document, run_delay_ns
from clients.asyncgen.schedule import schedule


class Generator:
    def __init__(self, args: argparse.Namespace) -> None:
        self.ctx = Context(args)
        self.hot = HotConnections(self.ctx)
        self.cold = ColdConnections(self.ctx)

    async def run(self) -> dict[str, Any]:
        ctx, a = self.ctx, self.ctx.args
        self.hot.start()
        self.cold.start()
        if a.rate_rps and a.hot_conns:
            ctx.spawn(schedule(ctx, self.hot.offer))
        if ctx.window_start > now_ns():
            await ctx.wait_until(ctx.window_start)
        ru0, rd0 = resource.getrusage(resource.RUSAGE_SELF), run_delay_ns()
        await ctx.wait_until(ctx.window_end)
        t_end = now_ns()
        self.hot.record_tcp_srtt()
        ctx.stop.set()
        ru1, rd1 = resource.getrusage(resource.RUSAGE_SELF), run_delay_ns()
        return document(ctx, self.cold.open, t_end, ru0, ru1, (rd1 - rd0) / 1e9)

    def stop(self) -> None:
        self.ctx.stop.set()

    def cancel_tasks(self) -> None:
        for task in list(self.ctx.tasks):
            task.cancel()
