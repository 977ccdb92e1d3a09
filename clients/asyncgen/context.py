"""What every part of one asyncio generator run shares: its options, the measured window,
the counters, the event loop and the stop event."""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from collections.abc import Coroutine
from typing import Any

from clients.asyncgen.counters import Counters
from clients.validity import LATE_THRESHOLD_US

HELD = 2**62  # the window of a cold-only hold: it ends when signalled


def now_ns() -> int:
    return time.monotonic_ns()


class Context:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.loop = asyncio.get_running_loop()
        self.c = Counters()
        self.rng = random.Random(args.seed)
        self.stop = asyncio.Event()
        self.tasks: set[asyncio.Task] = set()
        host, port = args.target_addrs[0]
        self.request = (f"GET {args.path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                        f"User-Agent: wb-asyncgen\r\n\r\n").encode()
        self.start = now_ns()
        if args.window_end_ns is not None:  # the caller's; a start already past counts from now
            self.window_start = max(args.window_start_ns, self.start)
            self.window_end = args.window_end_ns
        else:
            self.window_start = self.start + int(args.warmup_s * 1e9)
            held = args.duration_s <= 0  # cold-only: hold until signalled
            self.window_end = HELD if held else self.window_start + int(args.duration_s * 1e9)
        self.late_ns = int((args.late_us or LATE_THRESHOLD_US["asyncio"]) * 1e3)

    def in_window(self, t: int) -> bool:
        return self.window_start <= t < self.window_end

    def tick(self, t: int, column: int, n: int = 1) -> None:
        """One more sent (column 0), reply (1) or error (2) in the timeline's second of t."""
        self.c.timeline[(t - self.start) // 1_000_000_000][column] += n

    def count_error(self, kind: str, n: int = 1) -> None:
        t = now_ns()
        self.tick(t, 2, n)
        if self.in_window(t):
            self.c.errors[kind] += n

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = self.loop.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def wait_until(self, t: int) -> None:
        """Until monotonic time t, or sooner when stopped (the event loop's timers may fire
        a little early: a window's edge is not left before it is reached)."""
        while not self.stop.is_set() and (left := t - now_ns()) > 0:
            try:
                await asyncio.wait_for(self.stop.wait(), left / 1e9 if t < 2**61 else None)
            except TimeoutError:
                pass
