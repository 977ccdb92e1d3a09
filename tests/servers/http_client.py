"""A minimal blocking HTTP/1.1 client for driving wb-server in tests."""

from __future__ import annotations

import socket
from dataclasses import dataclass

PAPER_SIZES = (1, 92, 1259, 6144, 8192)


def expected_body(size: int) -> bytes:
    """wb-server's body: bytes 'a'..'z' repeating (servers/README.md)."""
    return bytes(ord("a") + i % 26 for i in range(size))


def request(method: str = "GET", path: str = "/", version: str = "1.1",
            headers: tuple[str, ...] = ("Host: test",)) -> bytes:
    return (f"{method} {path} HTTP/{version}\r\n" + "".join(h + "\r\n" for h in headers)
            + "\r\n").encode()


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes


class Client:
    """One connection; reads replies in order from a buffered reader."""

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = self.sock.makefile("rb")

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def reply(self, head_only: bool = False) -> Reply:
        status_line = self.reader.readline()
        if not status_line:
            raise ConnectionError("connection closed before a reply")
        version, status, _ = status_line.decode().split(" ", 2)
        assert version == "HTTP/1.1", status_line
        headers = {}
        while (line := self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        length = 0 if head_only else int(headers["content-length"])
        body = self.reader.read(length)
        assert len(body) == length, "short body"
        return Reply(int(status), headers, body)

    def get(self) -> Reply:
        self.send(request())
        return self.reply()

    def at_eof(self) -> bool:
        return self.reader.read(1) == b""

    def close(self) -> None:
        self.reader.close()
        self.sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
