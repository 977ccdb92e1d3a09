"""One connection of the asyncio generator, its response framing, and connecting it.

A connection belongs to an owner (the hot or the cold connections) that decides what it
sends and hears what comes back and how it ended."""

from __future__ import annotations

import asyncio
import collections
import errno
import re
import socket
from collections.abc import Callable
from typing import Protocol

from clients.asyncgen.context import Context

IP_BIND_ADDRESS_NO_PORT = 24  # linux/in.h; not exported by the socket module
CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:\s*(\d+)", re.IGNORECASE)
RETRY_PAUSE_S = 0.01  # S-Client: a failed connect is retried after a pause


class Owner(Protocol):
    def opened(self, conn: Conn, reopen: bool) -> None: ...
    def connect_failed(self, kind: str) -> None: ...
    def on_reply(self, conn: Conn, status: int) -> None: ...
    def on_closed(self, conn: Conn, kind: str | None) -> None: ...


class ResponseFramer:
    """Splits a byte stream into HTTP responses (status, Content-Length framing)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.body_left = 0
        self.status = 0

    def feed(self, data: bytes) -> list[int]:
        self.buf += data
        done = []
        while self.buf:
            if self.body_left:
                take = min(self.body_left, len(self.buf))
                del self.buf[:take]
                self.body_left -= take
                if not self.body_left:
                    done.append(self.status)
                continue
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > 8192:
                    raise ValueError("response header larger than 8 KiB")
                break
            head = bytes(self.buf[: end + 4])
            del self.buf[: end + 4]
            if not head.startswith(b"HTTP/1."):
                raise ValueError("not an HTTP/1.x response")
            self.status = int(head[9:12])
            m = CONTENT_LENGTH.search(head)
            if m is None and self.status >= 200 and self.status not in (204, 304):
                raise ValueError("response without Content-Length")
            self.body_left = int(m.group(1)) if m else 0
            if not self.body_left:
                done.append(self.status)
        return done


class Conn(asyncio.Protocol):
    """One connection; pending holds (intended, sent) times of the requests awaiting a reply."""

    def __init__(self, ctx: Context, owner: Owner, index: int) -> None:
        self.ctx, self.owner, self.index = ctx, owner, index
        self.transport: asyncio.Transport | None = None
        self.framer = ResponseFramer()
        self.pending: collections.deque[tuple[int, int]] = collections.deque()
        self.sent_on_conn = 0
        self.timer: asyncio.TimerHandle | None = None
        self.closing = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            statuses = self.framer.feed(data)
        except ValueError:
            self.fail("other")
            return
        for status in statuses:
            self.owner.on_reply(self, status)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.closing:
            return
        kind = "reset" if isinstance(exc, ConnectionResetError) or self.pending else None
        self.fail(kind if exc or self.pending else None)

    def send(self) -> None:
        assert self.transport is not None
        self.transport.write(self.ctx.request)
        self.sent_on_conn += 1

    def arm(self, delay_s: float | None, callback: Callable[[], object] | None) -> None:
        if self.timer:
            self.timer.cancel()
        self.timer = (self.ctx.loop.call_later(delay_s, callback)
                      if delay_s is not None and callback is not None else None)

    def fail(self, kind: str | None) -> None:
        """Close after an error (kind) or end of stream (None) and arrange the replacement."""
        if self.closing:
            return
        self.closing = True
        if self.timer:
            self.timer.cancel()
        if self.transport:
            self.transport.abort()
        self.owner.on_closed(self, kind)


async def connect(ctx: Context, owner: Owner, index: int, *, nodelay: bool,
                  reopen: bool = False) -> None:
    """Open connection index to its target from its source address and hand it to owner;
    on failure tell owner why and try again after a pause, until stopped."""
    a = ctx.args
    host, port = a.target_addrs[index % len(a.target_addrs)]
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    if nodelay:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if a.sources:
        sock.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
        sock.bind((a.sources[index % len(a.sources)], 0))
    try:
        await asyncio.wait_for(ctx.loop.sock_connect(sock, (host, port)), a.connect_timeout_s)
        _, conn = await ctx.loop.create_connection(lambda: Conn(ctx, owner, index), sock=sock)
    except (TimeoutError, OSError) as exc:
        sock.close()
        owner.connect_failed(_failure_kind(exc))
        await asyncio.sleep(RETRY_PAUSE_S)
        if not ctx.stop.is_set():
            ctx.spawn(connect(ctx, owner, index, nodelay=nodelay, reopen=reopen))
        return
    owner.opened(conn, reopen)


def _failure_kind(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "connect_timeout"
    if isinstance(exc, ConnectionRefusedError):
        return "refused"
    return "no_local_port" if getattr(exc, "errno", None) == errno.EADDRNOTAVAIL else "other"
