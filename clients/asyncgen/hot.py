"""Hot connections: requests at the schedule's intended times (or back to back in a closed
loop), their replies timed from the intended send, and the backlog of sends no connection
was free for."""

from __future__ import annotations

import collections
import socket

from clients.asyncgen.conn import Conn, connect
from clients.asyncgen.context import Context, now_ns

BACKLOG_MAX = 65536
TCP_INFO_RTT_OFFSET = 68  # linux/tcp.h struct tcp_info: 8 bytes of u8 fields, 15 u32s, tcpi_rtt


class HotConnections:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.ready: list[Conn] = []  # open and free to send
        self.open: set[Conn] = set()
        self.backlog: collections.deque[int] = collections.deque()  # intended send times

    def start(self) -> None:
        for i in range(self.ctx.args.hot_conns):
            self.ctx.spawn(connect(self.ctx, self, i, nodelay=True))

    # ---- connections (conn.Owner) ----
    def opened(self, conn: Conn, reopen: bool) -> None:
        self.open.add(conn)
        self.available(conn)

    def connect_failed(self, kind: str) -> None:
        self.ctx.count_error(kind)

    def on_closed(self, conn: Conn, kind: str | None) -> None:
        self.open.discard(conn)
        if conn in self.ready:
            self.ready.remove(conn)
        if kind:
            self.ctx.count_error(kind, max(1, len(conn.pending)))
        if not self.ctx.stop.is_set():
            self.ctx.spawn(connect(self.ctx, self, conn.index, nodelay=True))

    # ---- requests ----
    def offer(self, intended: int) -> None:
        """A send the schedule wants now: on a free connection, else into the backlog."""
        c = self.ctx.c
        if not self.backlog and self.ready:
            self.send(self.ready[-1], intended)
        elif len(self.backlog) < BACKLOG_MAX:
            self.backlog.append(intended)
        else:
            c.dropped += self.ctx.in_window(intended)

    def can_send(self, conn: Conn) -> bool:
        a = self.ctx.args
        return (not conn.closing and len(conn.pending) < a.max_outstanding
                and (not a.requests_per_conn or conn.sent_on_conn < a.requests_per_conn))

    def send(self, conn: Conn, intended: int) -> None:
        t = now_ns()
        conn.send()
        conn.pending.append((intended, t))
        if len(conn.pending) == 1:
            conn.arm(self.ctx.args.response_timeout_s, lambda: conn.fail("response_timeout"))
        self.ctx.tick(t, 0)
        if self.ctx.in_window(t):
            self.ctx.c.sent += 1
        if not self.can_send(conn) and conn in self.ready:
            self.ready.remove(conn)

    def available(self, conn: Conn) -> None:
        """conn may send again: first what the backlog holds, in a closed loop at once."""
        ctx, c = self.ctx, self.ctx.c
        expiry = int(ctx.args.response_timeout_s * 1e9)
        while self.backlog and self.can_send(conn):
            intended = self.backlog.popleft()
            if now_ns() - intended > expiry:
                c.dropped += ctx.in_window(intended)
                continue
            c.queued += ctx.in_window(intended)
            self.send(conn, intended)
        if not ctx.args.rate_rps:
            while self.can_send(conn):
                self.send(conn, now_ns())
        if self.can_send(conn) and conn not in self.ready:
            self.ready.append(conn)

    def on_reply(self, conn: Conn, status: int) -> None:
        ctx, c, a = self.ctx, self.ctx.c, self.ctx.args
        t = now_ns()
        if not conn.pending:
            return
        intended, sent = conn.pending.popleft()
        ctx.tick(t, 1)
        if ctx.in_window(t):
            c.replies += 1
            c.by_status[str(status)] += 1
        if ctx.in_window(intended):
            c.corrected.record(t - intended)
            c.uncorrected.record(t - sent)
        if conn.pending:
            conn.arm(max(0.0, (conn.pending[0][1] + a.response_timeout_s * 1e9 - t) / 1e9),
                     lambda: conn.fail("response_timeout"))
        else:
            conn.arm(None, None)
        if a.requests_per_conn and not conn.pending and conn.sent_on_conn >= a.requests_per_conn:
            conn.fail(None)  # this connection is done: open the next
            return
        self.available(conn)

    def record_tcp_srtt(self) -> None:
        """The kernel's smoothed RTT of every open hot connection (struct tcp_info)."""
        for conn in self.open:
            sock = conn.transport.get_extra_info("socket") if conn.transport else None
            if sock is None:
                continue
            info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_RTT_OFFSET + 4)
            rtt_us = int.from_bytes(info[TCP_INFO_RTT_OFFSET:TCP_INFO_RTT_OFFSET + 4], "little")
            if rtt_us:
                self.ctx.c.tcp_srtt.record(rtt_us * 1000)
