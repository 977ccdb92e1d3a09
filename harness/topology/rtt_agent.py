"""Measurement agent run inside a namespace (stdlib only, started by file path for speed).

serve --bind ADDR      listen, print the port, answer ECHO (ping-pong), SINK SECONDS (report
                       the goodput received) and SOURCE SECONDS (send bulk) connections.
measure --host --port  connect times, ping-pong RTTs and bulk goodput, printed as JSON.
        [--in-flight N --interval-us US]
                       a probe every US (about N in flight), pings over N + 1
                       connections in turn
        [--pair-netns FILE --pair-host --pair-port]
                       each connect and ping also done once to a second server, from the
                       namespace FILE (the floor path); its samples are under "floor".

Round trips are timed by the kernel so process wake-ups do not count: a connect by the
SYN/SYN-ACK sample in TCP_INFO, a ping by the pong's receive timestamp minus the send
time, less the echo's own turnaround (receive timestamp to send), which the pong carries.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import select
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

CHUNK = 65536
SO_TIMESTAMPNS = 35  # Linux; also the control message type
TCPI_RTT_OFFSET = 68  # struct tcp_info: 8 one-byte fields, then tcpi_rtt is the 16th u32
TURNAROUND = struct.Struct("d")
CLONE_NEWNET = 0x40000000


def timestamped_recv(sock: socket.socket, size: int) -> tuple[bytes, float | None]:
    """Reads up to size bytes and the kernel's receive time (CLOCK_REALTIME seconds); the
    time now if the kernel gave none (the option is set before any data, so it should)."""
    data, ancdata, _, _ = sock.recvmsg(size, socket.CMSG_SPACE(16))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            sec, nsec = struct.unpack("qq", payload[:16])
            return data, sec + nsec / 1e9
    return data, time.time()


def goodput_bps(timeline: list[tuple[float, int]]) -> float | None:
    """Receiver-side goodput over the last two thirds of the transfer (past slow start)."""
    if len(timeline) < 3:
        return None
    t0, t_end = timeline[0][0], timeline[-1][0]
    start = next(p for p in timeline if p[0] >= t0 + (t_end - t0) / 3)
    if t_end <= start[0]:
        return None
    return (timeline[-1][1] - start[1]) * 8 / (t_end - start[0])


def receive_for(sock: socket.socket, seconds: float) -> list[tuple[float, int]]:
    """What arrives until the sender's end, or seconds after the first byte: a link slower
    than its rate still holds the sender's buffered bytes, and they are not waited for."""
    timeline: list[tuple[float, int]] = []
    total, deadline = 0, None
    while deadline is None or (left := deadline - time.monotonic()) > 0:
        sock.settimeout(None if deadline is None else left)
        try:
            data = sock.recv(CHUNK)
        except TimeoutError:
            break
        if not data:
            break
        now = time.monotonic()
        deadline = deadline or now + seconds
        total += len(data)
        timeline.append((now, total))
    sock.settimeout(None)
    return timeline


def send_for(sock: socket.socket, seconds: float) -> None:
    """Sends for seconds, however slowly the path drains: a send blocked at the end stops
    there, and the receiver, which stops on its own clock, may go first."""
    payload = b"x" * CHUNK
    deadline = time.monotonic() + seconds
    try:
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
    except (TimeoutError, ConnectionError):
        pass
    sock.settimeout(None)


def abort(sock: socket.socket) -> None:
    """Closes with a reset: the bytes still queued for a slow link are dropped, not sent."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def read_line(conn: socket.socket) -> bytes:
    """A line, byte by byte: a buffered reader could swallow the ping after a command."""
    line = b""
    while (byte := conn.recv(1)) and byte != b"\n":
        line += byte
    return line


def handle(conn: socket.socket) -> None:
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        command = read_line(conn).split()
        if not command:
            return  # a connect-time probe
        if command[0] == b"ECHO":
            while True:
                data, arrived = timestamped_recv(conn, 1)
                if not data:
                    break
                conn.sendall(data + TURNAROUND.pack(time.time() - arrived))
        elif command[0] == b"SINK":
            timeline = receive_for(conn, float(command[1]))
            conn.sendall(json.dumps({"goodput_bps": goodput_bps(timeline)}).encode() + b"\n")
            # until the sender has the answer and resets: closing with its bytes unread would
            # reset first, and a reordering link could deliver that before the answer
            with contextlib.suppress(ConnectionError):
                while conn.recv(CHUNK):
                    pass
        elif command[0] == b"SOURCE":
            send_for(conn, float(command[1]))


def serve(bind: str) -> None:
    listener = socket.create_server((bind, 0), backlog=64)
    # Inherited by accepted sockets, so even a ping that comes with the command is stamped.
    listener.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    print(listener.getsockname()[1], flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def command_conn(host: str, port: int, line: bytes) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.connect((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(line)
    return sock


@contextmanager
def netns(path: str | None) -> Iterator[None]:
    """Sockets made inside stay in namespace path for good; None: this process's own."""
    if path is None:
        yield
        return
    libc = ctypes.CDLL(None, use_errno=True)

    def enter(fd: int, what: str) -> None:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {what}")

    home, there = os.open("/proc/self/ns/net", os.O_RDONLY), os.open(path, os.O_RDONLY)
    try:
        enter(there, path)
        try:
            yield
        finally:
            enter(home, "back home")
    finally:
        os.close(home)
        os.close(there)


def paced(count: int, interval_s: float) -> Iterator[int]:
    """Slots 0..count-1, each no sooner than interval_s after the one before went (a slot the
    machine made late does not make the next one early: probes never bunch)."""
    due = time.monotonic()
    for slot in range(count):
        if (wait := due - time.monotonic()) > 0:
            time.sleep(wait)
        due = time.monotonic() + interval_s
        yield slot


def handshake_rtt_ms(sock: socket.socket) -> float:
    """The SYN/SYN-ACK round trip of a non-blocking connect, once it is made."""
    select.select([], [sock], [])
    if error := sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
        raise OSError(error, f"connect: {os.strerror(error)}")
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    return struct.unpack_from("I", info, TCPI_RTT_OFFSET)[0] / 1000


def connect_rtts_ms(targets: list[tuple[str, int, str | None]], count: int,
                    interval_s: float) -> list[list[float]]:
    """count connects to each target, one per target in each paced slot."""
    started: list[list[socket.socket]] = [[] for _ in targets]
    try:
        for _ in paced(count, interval_s):
            for (host, port, namespace), socks in zip(targets, started, strict=True):
                with netns(namespace):
                    socks.append(socket.socket())
                socks[-1].setblocking(False)
                socks[-1].connect_ex((host, port))
        return [[handshake_rtt_ms(sock) for sock in socks] for socks in started]
    finally:
        for sock in (sock for socks in started for sock in socks):
            sock.close()


class Pinger:
    """Pings over in_flight + 1 echo connections in turn: a connection's pong is read (its
    time is the kernel's) before it carries the next ping, and the spare connection gives
    that pong a quarter round trip more than the pace asks for before its turn comes again."""

    def __init__(self, host: str, port: int, namespace: str | None, in_flight: int) -> None:
        self.socks: list[socket.socket] = []
        with netns(namespace):
            for _ in range(in_flight + 1):
                self.socks.append(command_conn(host, port, b"ECHO\n"))
        self.sent: list[float | None] = [None] * len(self.socks)
        self.rtts_ms: list[float] = []

    def ping(self, slot: int) -> None:
        turn = slot % len(self.socks)
        self._collect(turn)
        self.sent[turn] = time.time()
        self.socks[turn].sendall(b"p")

    def _collect(self, turn: int) -> None:
        if (sent := self.sent[turn]) is not None:
            pong, arrived = timestamped_recv(self.socks[turn], 1 + TURNAROUND.size)
            while len(pong) < 1 + TURNAROUND.size:
                pong += self.socks[turn].recv(1 + TURNAROUND.size - len(pong))
            turnaround = TURNAROUND.unpack(pong[1:])[0]
            self.rtts_ms.append((arrived - sent - turnaround) * 1000)
            self.sent[turn] = None

    def finish(self) -> list[float]:
        for turn in range(len(self.socks)):
            self._collect(turn)
        return self.rtts_ms


def probe_rtts(targets: list[tuple[str, int, str | None]], connects: int, pings: int,
               in_flight: int, interval_s: float) -> list[dict]:
    """Connect and ping RTTs to each (host, port, namespace): a probe to each target every
    interval_s, so every target sees the machine in the same moments, and about round trip /
    interval_s probes in flight at once, each at its own moment (a stall of the machine is in
    few of them) and each timed by the kernel (one does not delay another's sample)."""
    connect_ms = connect_rtts_ms(targets, connects, interval_s)
    pingers = []
    try:
        for host, port, namespace in targets:
            pingers.append(Pinger(host, port, namespace, in_flight))
        for slot in paced(pings, interval_s):
            for pinger in pingers:
                pinger.ping(slot)
        ping_ms = [pinger.finish() for pinger in pingers]
    finally:
        for sock in (sock for pinger in pingers for sock in pinger.socks):
            sock.close()
    return [{"connect_ms": c, "ping_ms": p} for c, p in zip(connect_ms, ping_ms, strict=True)]


def measure(args: argparse.Namespace) -> dict:
    targets = [(args.host, args.port, None)]
    if args.pair_netns:
        targets.append((args.pair_host, args.pair_port, args.pair_netns))
    result, *pair = probe_rtts(targets, args.connects, args.pings, args.in_flight,
                               args.interval_us / 1e6)
    if pair:
        result["floor"] = pair[0]
    if args.upload_s:
        sock = command_conn(args.host, args.port, f"SINK {args.upload_s}\n".encode())
        send_for(sock, args.upload_s)
        result["upload_bps"] = json.loads(read_line(sock))["goodput_bps"]
        abort(sock)
    if args.download_s:
        sock = command_conn(args.host, args.port, f"SOURCE {args.download_s}\n".encode())
        result["download_bps"] = goodput_bps(receive_for(sock, args.download_s))
        abort(sock)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="mode", required=True)
    sub.add_parser("serve").add_argument("--bind", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--host", required=True)
    m.add_argument("--port", type=int, required=True)
    m.add_argument("--pings", type=int, default=20)
    m.add_argument("--connects", type=int, default=5)
    m.add_argument("--in-flight", type=int, default=1)
    m.add_argument("--interval-us", type=float, default=0.0)
    m.add_argument("--upload-s", type=float, default=0.0)
    m.add_argument("--download-s", type=float, default=0.0)
    m.add_argument("--pair-netns")
    m.add_argument("--pair-host")
    m.add_argument("--pair-port", type=int)
    args = parser.parse_args()
    try:
        if args.mode == "serve":
            serve(args.bind)
        else:
            json.dump(measure(args), sys.stdout)
    except OSError as exc:
        # e.g. its namespace was torn down under it (a stop signal during calibration): one
        # line for the calibration's error, not a traceback on the runner's terminal
        sys.exit(f"rtt_agent {args.mode}: {exc}")


if __name__ == "__main__":
    main()
