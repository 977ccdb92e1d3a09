"""Cold connections: opened at the paced ramp (at most max_connecting at once), held idle,
each sending one request every cold_interval_s if asked, and reopened when closed."""

from __future__ import annotations

import asyncio
import json

from clients.asyncgen.conn import Conn, connect
from clients.asyncgen.context import Context, now_ns


class ColdConnections:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.open = 0
        self.ready = asyncio.Event()  # all requested connections were open at once
        self.connecting = asyncio.Semaphore(ctx.args.max_connecting)

    def start(self) -> None:
        a = self.ctx.args
        if not a.cold_conns:
            return
        self.ctx.spawn(self.ramp())
        if not a.hot_conns:
            self.ctx.spawn(self.announce_ready())

    async def ramp(self) -> None:
        ctx, a = self.ctx, self.ctx.args
        for i in range(a.cold_conns):
            if ctx.stop.is_set():
                return
            if a.cold_ramp_rps:
                delay = ctx.start / 1e9 + i / a.cold_ramp_rps - now_ns() / 1e9
                if delay > 0:
                    await asyncio.sleep(delay)
            await self.connecting.acquire()
            ctx.spawn(self._open(a.hot_conns + i))

    async def _open(self, index: int, reopen: bool = False) -> None:
        try:
            await connect(self.ctx, self, index, nodelay=False, reopen=reopen)
        finally:
            self.connecting.release()

    async def announce_ready(self) -> None:
        """Cold-only runs tell their caller when every connection is open (stdout event)."""
        await self.ready.wait()
        self.ctx.c.established_s = (now_ns() - self.ctx.start) / 1e9
        print(json.dumps({"event": "cold_ready", "established": self.open}), flush=True)

    # ---- connections (conn.Owner) ----
    def opened(self, conn: Conn, reopen: bool) -> None:
        c, a = self.ctx.c, self.ctx.args
        self.open += 1
        c.cold_established = max(c.cold_established, self.open)
        c.cold_reconnected += reopen
        if a.cold_interval_s:
            conn.arm(self.ctx.rng.random() * a.cold_interval_s, lambda: self.send(conn))
        if self.open >= a.cold_conns and not self.ready.is_set():
            self.ready.set()

    def connect_failed(self, kind: str) -> None:
        self.ctx.c.cold_failed += 1

    def on_closed(self, conn: Conn, kind: str | None) -> None:
        self.open -= 1
        self.ctx.c.cold_failed += kind is not None
        if not self.ctx.stop.is_set():
            self.ctx.spawn(self._reopen(conn.index))

    async def _reopen(self, index: int) -> None:
        await self.connecting.acquire()
        await self._open(index, reopen=True)

    # ---- one request every interval ----
    def send(self, conn: Conn) -> None:
        if conn.closing:
            return
        conn.send()
        conn.pending.append((0, 0))
        self.ctx.c.cold_requests += 1
        conn.arm(self.ctx.args.response_timeout_s, lambda: conn.fail("response_timeout"))

    def on_reply(self, conn: Conn, status: int) -> None:
        if conn.pending:
            conn.pending.popleft()
        self.ctx.c.cold_replies += 1
        conn.arm(self.ctx.args.cold_interval_s, lambda: self.send(conn))
