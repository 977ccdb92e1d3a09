"""Measurement agent run inside a namespace (stdlib only, started by file path for speed).

serve --bind ADDR      listen, print the port, answer ECHO (ping-pong), SINK SECONDS (report
                       the goodput received) and SOURCE SECONDS (send bulk) connections.
measure --host --port  connect times, ping-pong RTTs and bulk goodput, printed as JSON.
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


def connect_rtt_ms(host: str, port: int, namespace: str | None) -> float:
    with netns(namespace):
        sock = socket.create_connection((host, port))
    with sock:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
        return struct.unpack_from("I", info, TCPI_RTT_OFFSET)[0] / 1000


def ping_ms(sock: socket.socket) -> float:
    sent = time.time()
    sock.sendall(b"p")
    pong, arrived = timestamped_recv(sock, 1 + TURNAROUND.size)
    while len(pong) < 1 + TURNAROUND.size:
        pong += sock.recv(1 + TURNAROUND.size - len(pong))
    turnaround = TURNAROUND.unpack(pong[1:])[0]
    return (arrived - sent - turnaround) * 1000


def probe_rtts(targets: list[tuple[str, int, str | None]], connects: int,
               pings: int) -> list[dict]:
    """Connect and ping RTTs to each (host, port, namespace), taking turns probe by probe so
    every target sees the machine in the same moments."""
    results: list[dict] = [{"connect_ms": [], "ping_ms": []} for _ in targets]
    for _ in range(connects):
        for (host, port, namespace), result in zip(targets, results, strict=True):
            result["connect_ms"].append(connect_rtt_ms(host, port, namespace))
    socks = []
    try:
        for host, port, namespace in targets:
            with netns(namespace):
                socks.append(command_conn(host, port, b"ECHO\n"))
        for _ in range(pings):
            for sock, result in zip(socks, results, strict=True):
                result["ping_ms"].append(ping_ms(sock))
    finally:
        for sock in socks:
            sock.close()
    return results


def measure(args: argparse.Namespace) -> dict:
    targets = [(args.host, args.port, None)]
    if args.pair_netns:
        targets.append((args.pair_host, args.pair_port, args.pair_netns))
    result, *pair = probe_rtts(targets, args.connects, args.pings)
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
