"""The asyncio load generator: wb-sclient's hot and cold modes in portable Python.

Same options and result schema as wb-sclient (`python -m clients.asyncgen --help`); uvloop
is used when installed. A cross-check of the native generator at moderate rates.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import errno
import ipaddress
import json
import os
import random
import re
import resource
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clients.atomic import write_atomic
from clients.schema import ERROR_KINDS, Histogram, skeleton
from clients.targets import check_request_path

IP_BIND_ADDRESS_NO_PORT = 24  # linux/in.h; not exported by the socket module
TCP_INFO_RTT_OFFSET = 68  # linux/tcp.h struct tcp_info: 8 bytes of u8 fields, 15 u32s, tcpi_rtt
PER_SOURCE_CONNS = 5000
CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:\s*(\d+)", re.IGNORECASE)
DEFAULT_LATE_US = 5000.0  # asyncio timers have millisecond granularity


def now_ns() -> int:
    return time.monotonic_ns()


def run_delay_ns() -> int:
    try:
        with open("/proc/self/schedstat") as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0


@dataclass
class Counters:
    """What the generator measures; laid out like wb-sclient's result block."""

    sent: int = 0
    queued: int = 0
    dropped: int = 0
    replies: int = 0
    scheduled: int = 0
    late: int = 0
    max_slip_ns: int = 0
    by_status: collections.Counter = field(default_factory=collections.Counter)
    errors: collections.Counter = field(default_factory=collections.Counter)
    corrected: Histogram = field(default_factory=Histogram)
    uncorrected: Histogram = field(default_factory=Histogram)
    tcp_srtt: Histogram = field(default_factory=Histogram)
    timeline: dict[int, list[int]] = field(
        default_factory=lambda: collections.defaultdict(lambda: [0, 0, 0]))  # sent, replies, errors
    cold_established: int = 0
    cold_reconnected: int = 0
    cold_failed: int = 0
    cold_requests: int = 0
    cold_replies: int = 0
    established_s: float | None = None


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
    """One connection, hot or cold; the generator decides what it sends."""

    def __init__(self, gen: Generator, index: int, cold: bool) -> None:
        self.gen, self.index, self.cold = gen, index, cold
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
            self.gen.on_reply(self, status)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.closing:
            return
        kind = "reset" if isinstance(exc, ConnectionResetError) or self.pending else None
        self.fail(kind if exc or self.pending else None)

    def send(self) -> None:
        assert self.transport is not None
        self.transport.write(self.gen.request)
        self.sent_on_conn += 1

    def arm(self, delay_s: float | None, callback) -> None:
        if self.timer:
            self.timer.cancel()
        self.timer = self.gen.loop.call_later(delay_s, callback) if delay_s is not None else None

    def fail(self, kind: str | None) -> None:
        """Close after an error (kind) or end of stream (None) and arrange the replacement."""
        if self.closing:
            return
        self.closing = True
        if self.timer:
            self.timer.cancel()
        if self.transport:
            self.transport.abort()
        self.gen.on_closed(self, kind)


class Generator:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.loop = asyncio.get_running_loop()
        self.c = Counters()
        self.rng = random.Random(args.seed)
        host, port = args.targets[0]
        self.targets = args.targets
        self.request = (f"GET {args.path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                        f"User-Agent: wb-asyncgen\r\n\r\n").encode()
        self.ready: list[Conn] = []
        self.hot: set[Conn] = set()  # open hot connections
        self.backlog: collections.deque[int] = collections.deque()
        self.cold_open = 0
        self.cold_ready = asyncio.Event()
        self.stop = asyncio.Event()
        self.tasks: set[asyncio.Task] = set()
        self.start = now_ns()
        self.window_start = self.start + int(args.warmup * 1e9)
        held = args.duration <= 0  # cold-only: hold until signalled
        self.window_end = 2**62 if held else self.window_start + int(args.duration * 1e9)
        self.late_ns = int((args.late_us or DEFAULT_LATE_US) * 1e3)

    # ---- bookkeeping ----
    def in_window(self, t: int) -> bool:
        return self.window_start <= t < self.window_end

    def tick(self, t: int, column: int, n: int = 1) -> None:
        self.c.timeline[(t - self.start) // 1_000_000_000][column] += n

    def count_error(self, kind: str, n: int = 1) -> None:
        t = now_ns()
        self.tick(t, 2, n)
        if self.in_window(t):
            self.c.errors[kind] += n

    def spawn(self, coro) -> None:
        task = self.loop.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # ---- connections ----
    async def connect(self, conn_index: int, cold: bool, reopen: bool = False) -> None:
        a = self.args
        host, port = self.targets[conn_index % len(self.targets)]
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        if not cold:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if a.sources:
            sock.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
            sock.bind((a.sources[conn_index % len(a.sources)], 0))
        try:
            await asyncio.wait_for(self.loop.sock_connect(sock, (host, port)), a.connect_timeout)
            _, proto = await self.loop.create_connection(
                lambda: Conn(self, conn_index, cold), sock=sock)
        except (TimeoutError, OSError) as exc:
            sock.close()
            kind = ("connect_timeout" if isinstance(exc, TimeoutError) else
                    "refused" if isinstance(exc, ConnectionRefusedError) else
                    "no_local_port" if exc.errno == errno.EADDRNOTAVAIL else "other")
            if cold:
                self.c.cold_failed += 1
            else:
                self.count_error(kind)
            await asyncio.sleep(0.01)  # S-Client: a failed connect is retried after a pause
            if not self.stop.is_set():
                self.spawn(self.connect(conn_index, cold, reopen))
            return
        if cold:
            self.cold_established(proto, reopen)
        else:
            self.hot.add(proto)
            self.available(proto)

    def cold_established(self, conn: Conn, reopen: bool) -> None:
        self.cold_open += 1
        self.c.cold_established = max(self.c.cold_established, self.cold_open)
        self.c.cold_reconnected += reopen
        if self.args.cold_interval:
            conn.arm(self.rng.random() * self.args.cold_interval, lambda: self.cold_send(conn))
        if self.cold_open >= self.args.cold and not self.cold_ready.is_set():
            self.cold_ready.set()

    def cold_send(self, conn: Conn) -> None:
        if conn.closing:
            return
        conn.send()
        conn.pending.append((0, 0))
        self.c.cold_requests += 1
        conn.arm(self.args.response_timeout, lambda: conn.fail("response_timeout"))

    def on_closed(self, conn: Conn, kind: str | None) -> None:
        self.hot.discard(conn)
        if conn in self.ready:
            self.ready.remove(conn)
        if conn.cold:
            self.cold_open -= 1
            self.c.cold_failed += kind is not None
        elif kind:
            self.count_error(kind, max(1, len(conn.pending)))
        if self.stop.is_set():
            return
        if conn.cold:
            self.spawn(self.reconnect_cold(conn.index))
        else:
            self.spawn(self.connect(conn.index, cold=False))

    async def reconnect_cold(self, index: int) -> None:
        async with self.connecting:
            await self.connect(index, cold=True, reopen=True)

    # ---- hot requests ----
    def can_send(self, conn: Conn) -> bool:
        a = self.args
        return (not conn.closing and len(conn.pending) < a.max_outstanding
                and (not a.requests_per_conn or conn.sent_on_conn < a.requests_per_conn))

    def hot_send(self, conn: Conn, intended: int) -> None:
        t = now_ns()
        conn.send()
        conn.pending.append((intended, t))
        if len(conn.pending) == 1:
            conn.arm(self.args.response_timeout, lambda: conn.fail("response_timeout"))
        self.tick(t, 0)
        if self.in_window(t):
            self.c.sent += 1
        if not self.can_send(conn) and conn in self.ready:
            self.ready.remove(conn)

    def available(self, conn: Conn) -> None:
        expiry = int(self.args.response_timeout * 1e9)
        while self.backlog and self.can_send(conn):
            intended = self.backlog.popleft()
            if now_ns() - intended > expiry:
                self.c.dropped += self.in_window(intended)
                continue
            self.c.queued += self.in_window(intended)
            self.hot_send(conn, intended)
        if not self.args.rate:
            while self.can_send(conn):
                self.hot_send(conn, now_ns())
        if self.can_send(conn) and conn not in self.ready:
            self.ready.append(conn)

    def on_reply(self, conn: Conn, status: int) -> None:
        t = now_ns()
        if conn.cold:
            if conn.pending:
                conn.pending.popleft()
            self.c.cold_replies += 1
            conn.arm(self.args.cold_interval, lambda: self.cold_send(conn))
            return
        if not conn.pending:
            return
        intended, sent = conn.pending.popleft()
        self.tick(t, 1)
        if self.in_window(t):
            self.c.replies += 1
            self.c.by_status[str(status)] += 1
        if self.in_window(intended):
            self.c.corrected.record(t - intended)
            self.c.uncorrected.record(t - sent)
        if conn.pending:
            conn.arm(max(0.0, (conn.pending[0][1] + self.args.response_timeout * 1e9 - t) / 1e9),
                     lambda: conn.fail("response_timeout"))
        else:
            conn.arm(None, None)
        a = self.args
        if a.requests_per_conn and not conn.pending and conn.sent_on_conn >= a.requests_per_conn:
            conn.fail(None)  # this connection is done: open the next
            return
        self.available(conn)

    async def schedule(self) -> None:
        """Open loop: intended send times at the offered rate, fixed or Poisson."""
        a = self.args
        seq, end = 0.0, min(self.window_end, 2**62)
        while not self.stop.is_set():
            intended = self.start + int(seq * 1e9)
            if intended >= end:
                return
            delay = (intended - now_ns()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            t = now_ns()
            slip = t - intended
            if self.in_window(intended):
                self.c.scheduled += 1
                self.c.late += slip > self.late_ns
                self.c.max_slip_ns = max(self.c.max_slip_ns, slip)
            if not self.backlog and self.ready:
                self.hot_send(self.ready[-1], intended)
            elif len(self.backlog) < 65536:
                self.backlog.append(intended)
            else:
                self.c.dropped += self.in_window(intended)
            seq += self.rng.expovariate(a.rate) if a.arrivals == "poisson" else 1 / a.rate

    async def cold_ramp(self) -> None:
        a = self.args
        for i in range(a.cold):
            if self.stop.is_set():
                return
            if a.cold_ramp:
                delay = self.start / 1e9 + i / a.cold_ramp - now_ns() / 1e9
                if delay > 0:
                    await asyncio.sleep(delay)
            await self.connecting.acquire()

            async def one(index: int) -> None:
                try:
                    await self.connect(index, cold=True)
                finally:
                    self.connecting.release()

            self.spawn(one(a.hot_conns + i))

    async def run(self) -> dict[str, Any]:
        a = self.args
        self.connecting = asyncio.Semaphore(a.max_connecting)
        for i in range(a.hot_conns):
            self.spawn(self.connect(i, cold=False))
        if a.cold:
            self.spawn(self.cold_ramp())
            if a.cold and not a.hot_conns:
                self.spawn(self.announce_cold_ready())
        if a.rate and a.hot_conns:
            self.spawn(self.schedule())
        if self.window_start > now_ns():
            await self.wait_until(self.window_start)
        ru0, rd0 = resource.getrusage(resource.RUSAGE_SELF), run_delay_ns()
        await self.wait_until(self.window_end)
        t_end = now_ns()
        self.record_tcp_srtt()
        self.stop.set()
        ru1, rd1 = resource.getrusage(resource.RUSAGE_SELF), run_delay_ns()
        return self.document(t_end, ru0, ru1, (rd1 - rd0) / 1e9)

    def record_tcp_srtt(self) -> None:
        """The kernel's smoothed RTT of every open hot connection (struct tcp_info)."""
        for conn in self.hot:
            sock = conn.transport.get_extra_info("socket") if conn.transport else None
            if sock is None:
                continue
            info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_RTT_OFFSET + 4)
            rtt_us = int.from_bytes(info[TCP_INFO_RTT_OFFSET:TCP_INFO_RTT_OFFSET + 4], "little")
            if rtt_us:
                self.c.tcp_srtt.record(rtt_us * 1000)

    async def wait_until(self, t: int) -> None:
        timeout = (t - now_ns()) / 1e9 if t < 2**61 else None
        try:
            await asyncio.wait_for(self.stop.wait(), timeout)
        except TimeoutError:
            pass

    async def announce_cold_ready(self) -> None:
        await self.cold_ready.wait()
        self.c.established_s = (now_ns() - self.start) / 1e9
        print(json.dumps({"event": "cold_ready", "established": self.cold_open}), flush=True)

    # ---- the result document ----
    def document(self, t_end: int, ru0, ru1, run_delay_s: float) -> dict[str, Any]:
        a, c = self.args, self.c
        window_s = max(0.0, (min(t_end, self.window_end) - self.window_start) / 1e9)
        user = ru1.ru_utime - ru0.ru_utime
        sys_ = ru1.ru_stime - ru0.ru_stime
        doc = skeleton("asyncio", a.config)  # facts only: clients.validity judges them
        errors = {k: c.errors[k] for k in ERROR_KINDS}
        span = int(a.warmup + window_s + 0.999)
        last = max([span, *(k + 1 for k in c.timeline)])
        doc.update(
            generator_version=f"python {sys.version.split()[0]}, {type(self.loop).__module__}",
            duration_s=window_s,
            offered_rate_rps=a.rate if a.rate and a.hot_conns else None,
            request_rate_rps=c.sent / window_s if window_s else 0.0,
            reply_rate_rps=c.replies / window_s if window_s else 0.0,
            requests={"scheduled": c.scheduled, "sent": c.sent, "queued": c.queued,
                      "dropped": c.dropped},
            replies={"total": c.replies, "by_status": dict(c.by_status)},
            errors=errors,
            late_sends=c.late,
            late_threshold_us=self.late_ns / 1e3,
            max_schedule_slip_us=c.max_slip_ns / 1e3,
            latency={"corrected": c.corrected.to_dict(), "uncorrected": c.uncorrected.to_dict(),
                     "tcp_srtt": c.tcp_srtt.to_dict()},
            timeline=[{"t_s": t, "sent": c.timeline[t][0], "replies": c.timeline[t][1],
                       "errors": c.timeline[t][2]} for t in range(last)],
            cold={"requested": a.cold, "established": c.cold_established,
                  "held": self.cold_open, "reconnected": c.cold_reconnected,
                  "failed": c.cold_failed, "requests": c.cold_requests,
                  "replies": c.cold_replies,
                  "established_s": c.established_s},
            generator_cpu={"user_s": user, "sys_s": sys_,
                           "pct": 100 * (user + sys_) / window_s if window_s else None,
                           "run_delay_s": run_delay_s},
            generator_memory={"rss_kb": ru1.ru_maxrss, "bytes_per_cold_conn": None},
        )
        return doc


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m clients.asyncgen", description=__doc__)
    p.add_argument("--target", action="append", required=True, help="ADDR:PORT (repeatable)")
    p.add_argument("--source", help="source addresses: comma list or CIDR")
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--warmup", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--cpu", type=int)
    p.add_argument("--hot-conns", type=int, default=0)
    p.add_argument("--rate", type=float, default=0.0, help="requests/s; 0: closed loop")
    p.add_argument("--arrivals", choices=("fixed", "poisson"), default="fixed")
    p.add_argument("--requests-per-conn", type=int, default=0)
    p.add_argument("--path", default="/")
    p.add_argument("--connect-timeout", type=float, default=5.0)
    p.add_argument("--response-timeout", type=float, default=5.0)
    p.add_argument("--max-outstanding", type=int, default=1)
    p.add_argument("--late-us", type=float)
    p.add_argument("--cold", type=int, default=0)
    p.add_argument("--cold-ramp", type=float, default=0.0)
    p.add_argument("--cold-interval", type=float, default=0.0)
    p.add_argument("--max-connecting", type=int, default=512)
    p.add_argument("--stream", type=int, default=0)
    p.add_argument("--stream-mbps", type=float)
    p.add_argument("--json")
    a = p.parse_args(argv)
    try:
        check_request_path(a.path)
    except ValueError as exc:
        p.error(f"--path: {exc}")
    if a.stream:
        p.error("--stream: the asyncio generator has no stream mode; use wb-sclient")
    if not (a.hot_conns or a.cold):
        p.error("nothing to do: give --hot-conns or --cold")
    if a.duration <= 0 and (a.hot_conns or not a.cold):
        p.error("--duration 0 (hold until signalled) is only for cold-only runs")
    a.targets = []
    for t in a.target:
        host, _, port = t.rpartition(":")
        if not port.isdigit():
            p.error(f"--target {t}: expected ADDR:PORT")
        a.targets.append((host, int(port)))
    a.sources = source_list(a.source, a.targets, a.hot_conns + a.cold)
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
    if a.hot_conns + a.cold + 64 > limit:
        p.error(f"{a.hot_conns + a.cold} connections exceed RLIMIT_NOFILE {limit}; the asyncio "
                "generator does not shard: use wb-sclient")
    a.config = {"targets": a.target, "source_addrs": a.source, "source_addr_count": len(a.sources),
                "hot_conns": a.hot_conns, "rate_rps": a.rate or None, "arrivals": a.arrivals,
                "requests_per_conn": a.requests_per_conn or None, "path": a.path,
                "connect_timeout_s": a.connect_timeout, "response_timeout_s": a.response_timeout,
                "max_outstanding": a.max_outstanding, "cold_conns": a.cold,
                "cold_ramp_rps": a.cold_ramp or None, "cold_interval_s": a.cold_interval or None,
                "duration_s": a.duration, "warmup_s": a.warmup, "seed": a.seed, "cpu": a.cpu}
    return a


def source_list(spec: str | None, targets: list[tuple[str, int]], total: int) -> list[str]:
    """Explicit list or CIDR; on loopback past PER_SOURCE_CONNS, 127.100.0.x automatically."""
    if spec and spec != "auto":
        if "/" in spec:
            return [str(h) for h in ipaddress.ip_network(spec, strict=False).hosts()]
        return spec.split(",")
    if total <= PER_SOURCE_CONNS or not all(h.startswith("127.") for h, _ in targets):
        return []
    base = int(ipaddress.IPv4Address("127.100.0.1"))
    return [str(ipaddress.IPv4Address(base + i)) for i in range(-(-total // PER_SOURCE_CONNS))]


def write_json(doc: dict[str, Any], path: str | None) -> None:
    text = json.dumps(doc) + "\n"
    if not path:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    write_atomic(Path(path), text.encode())


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    gen = Generator(args)
    for sig in (signal.SIGTERM, signal.SIGINT):
        gen.loop.add_signal_handler(sig, gen.stop.set)
    doc = await gen.run()
    for task in list(gen.tasks):
        task.cancel()
    return doc


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    try:
        import uvloop
    except ImportError:
        doc = asyncio.run(amain(args))
    else:
        doc = uvloop.run(amain(args))
    write_json(doc, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
