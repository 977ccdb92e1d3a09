"""HTTP behaviour of every backend, normal and ASan+UBSan builds."""

from __future__ import annotations

import socket
import struct
import time

from servers.idle_conns import hold_idle, idle_connections

from .conftest import StartServer
from .http_client import PAPER_SIZES, Client, expected_body, request


def test_exact_bodies_for_each_paper_size(serve: StartServer) -> None:
    for size in PAPER_SIZES:
        server = serve(reply_bytes=size)
        with Client(server.host, server.port) as c:
            reply = c.get()
            assert reply.status == 200
            assert reply.body == expected_body(size)
            c.send(request("HEAD"))
            head = c.reply(head_only=True)
            assert head.status == 200 and head.headers["content-length"] == str(size)
            assert c.get().body == expected_body(size)  # HEAD left nothing behind


def test_ten_thousand_keep_alive_requests_on_one_connection(serve: StartServer) -> None:
    server = serve()
    body = expected_body(92)
    with Client(server.host, server.port) as c:
        for _ in range(10_000):
            c.send(request())
            assert c.reply().body == body
    stats = server.snapshot()
    assert stats["connections_accepted"] == 1
    assert stats["requests"] == stats["replies"] == 10_000


def test_hundred_pipelined_requests_answered_in_order(serve: StartServer) -> None:
    server = serve(reply_bytes=1259)
    # Mixed methods make the order visible: HEAD replies carry no body.
    methods = ["HEAD" if i % 3 == 0 else "GET" for i in range(100)]
    with Client(server.host, server.port) as c:
        c.send(b"".join(request(m, f"/{i}") for i, m in enumerate(methods)))
        for m in methods:
            reply = c.reply(head_only=m == "HEAD")
            assert reply.status == 200
            assert reply.body == (b"" if m == "HEAD" else expected_body(1259))
        assert c.get().status == 200


def test_request_delivered_one_byte_per_write(serve: StartServer) -> None:
    server = serve()
    with Client(server.host, server.port) as c:
        for byte in request(headers=("Host: test", "User-Agent: slow")):
            c.send(bytes([byte]))
            time.sleep(0.001)  # let each byte arrive as its own segment
        assert c.reply().body == expected_body(92)


def test_five_thousand_idle_connections_and_a_hot_client(serve: StartServer) -> None:
    server = serve(backlog=8192)
    with idle_connections(server.host, server.port, 5000) as idle:
        hold_idle(server, idle)
        # The hot connection's descriptor in the server is past 5000, far past 1024.
        with Client(server.host, server.port) as hot:
            for _ in range(50):
                assert hot.get().status == 200
        stats = server.snapshot()
        assert stats["connections_max"] >= 5001
    # Closed idle connections are noticed and their descriptors released.
    for _ in range(500):
        if server.snapshot()["connections_current"] == 0:
            break
    assert server.snapshot()["connections_closed"] == 5001


def reset(sock: socket.socket) -> None:
    """Close with RST instead of FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def test_bad_clients_never_stop_the_server_answering_others(serve: StartServer) -> None:
    server = serve(reply_bytes=8192)
    addr = (server.host, server.port)
    with Client(*addr) as stalled, Client(*addr) as hot:
        stalled.send(b"GET / HTTP/1.1\r\nHost: te")  # and never more

        with Client(*addr) as garbage:
            garbage.send(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not http\r\n\r\n")
            assert garbage.reply().status == 400
            assert garbage.at_eof()

        with Client(*addr) as oversized:
            oversized.send(b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n")
            assert oversized.reply().status == 431
            assert oversized.at_eof()

        mid_request = socket.create_connection(addr)
        mid_request.sendall(b"GET / HTTP/1.1\r\nHo")
        reset(mid_request)

        # Reset while the server still has 100 large replies to write.
        flood = socket.create_connection(addr)
        flood.sendall(request() * 100)
        reset(flood)

        with Client(*addr) as half_closed:
            half_closed.send(request() * 2)
            half_closed.sock.shutdown(socket.SHUT_WR)
            assert half_closed.reply().status == half_closed.reply().status == 200
            assert half_closed.at_eof()

        for _ in range(20):
            assert hot.get().body == expected_body(8192)
    stats = server.snapshot()
    assert stats["replies_400"] == 1 and stats["replies_431"] == 1


def test_transfer_encoding_gets_501_and_a_close(serve: StartServer) -> None:
    """RFC 9112 6.1: a transfer coding the server does not implement gets 501 Not
    Implemented, and the connection is closed (its body's framing is unknown)."""
    server = serve()
    with Client(server.host, server.port) as c:
        assert c.get().status == 200  # a connection that already served requests
        c.send(b"POST / HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"5\r\nhello\r\n0\r\n\r\n")
        reply = c.reply()
        assert reply.status == 501 and reply.headers["connection"] == "close"
        assert c.at_eof()
    with Client(server.host, server.port) as c:  # with Content-Length too, and HTTP/1.0
        c.send(b"POST / HTTP/1.0\r\nContent-Length: 5\r\nTRANSFER-encoding: gzip\r\n\r\nhello")
        assert c.reply().status == 501
        assert c.at_eof()
    with Client(server.host, server.port) as c:  # garbage stays 400 even with the header
        c.send(b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nbad header\r\n\r\n")
        assert c.reply().status == 400
        assert c.at_eof()
    stats = server.snapshot()
    assert (stats["replies_501"], stats["replies_400"], stats["requests"]) == (2, 1, 1)
