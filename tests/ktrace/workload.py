"""A known workload for wb-ktrace's tests: CALLS dispatch calls over FDS idle descriptors.

    workload.py select|select-wait|epoll|tcp|spin FDS CALLS [--fork]

Prints its pid, waits for a line on stdin, makes the calls (in a child it forks then, with
--fork), prints "done", waits for another line and exits. `spin` prints its pid and makes
select calls until it is killed (a busy process outside the measured tree); `select-wait` makes
its select calls with a 1 ms timeout, asleep in each (a select server between requests). Idle
descriptors are eventfds that nothing writes: never ready, so every call scans them all and
returns none. `tcp` makes CALLS round trips of 100 bytes each way over one loopback TCP
connection it opened before (FDS unused): 2 x CALLS sends and 2 x CALLS receives."""

from __future__ import annotations

import os
import resource
import select
import socket
import sys

MESSAGE = 100  # bytes each way per round trip


def round_trips(count: int) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    print(os.getpid(), flush=True)  # connected: the window sees the round trips only
    sys.stdin.readline()
    for _ in range(count):
        for sender, receiver in ((client, server), (server, client)):
            sender.sendall(b"x" * MESSAGE)
            receiver.recv(MESSAGE, socket.MSG_WAITALL)
    print("done", flush=True)
    sys.stdin.readline()


def calls(kind: str, fds: list[int], count: int) -> None:
    if kind == "epoll":
        poller = select.epoll()
        for fd in fds:
            poller.register(fd, select.EPOLLIN)
        for _ in range(count):
            poller.poll(0)
        return
    timeout = 0.001 if kind == "select-wait" else 0
    for _ in range(count):
        select.select(fds, [], [], timeout)


def main() -> None:
    kind, fd_count, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    fork = "--fork" in sys.argv[4:]
    if kind == "tcp":
        return round_trips(count)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    fds = [os.eventfd(0) for _ in range(fd_count)]  # select takes descriptors below 1024
    print(os.getpid(), flush=True)
    if kind == "spin":
        while True:
            calls("select", fds, 1000)
    sys.stdin.readline()
    if fork:
        child = os.fork()
        if child == 0:
            calls(kind, fds, count)
            os._exit(0)
        os.waitpid(child, 0)
    else:
        calls(kind, fds, count)
    print("done", flush=True)
    sys.stdin.readline()


if __name__ == "__main__":
    main()
