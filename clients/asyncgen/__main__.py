"""`python -m clients.asyncgen`: run the asyncio generator, write its result document."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from clients.asyncgen.generator import Generator
from clients.asyncgen.options import parse_args
from clients.atomic import write_atomic


async def amain(args: argparse.Namespace) -> tuple[dict[str, Any], bool]:
    """The result document, and whether a stop signal ended the run early."""
    gen = Generator(args)
    signalled: list[int] = []

    def stop(sig: int) -> None:
        signalled.append(sig)
        gen.stop()

    for sig in (signal.SIGTERM, signal.SIGINT):
        gen.ctx.loop.add_signal_handler(sig, stop, sig)
    doc = await gen.run()
    gen.cancel_tasks()
    return doc, bool(signalled)


def write_json(doc: dict[str, Any], path: str | None) -> None:
    text = json.dumps(doc) + "\n"
    if not path:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    write_atomic(Path(path), text.encode())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    try:
        import uvloop
    except ImportError:
        doc, stopped = asyncio.run(amain(args))
    else:
        doc, stopped = uvloop.run(amain(args))
    write_json(doc, args.json_path)
    if args.window_end_ns is not None and not stopped:  # the signal is spent: none follows
        hold_until_released()
    return 0


def hold_until_released() -> None:
    """Given the caller's window, the generator stays, idle, until its stdin ends (or a stop
    signal): whoever reads its CPU at the window's end edge still finds it, then closes
    stdin (wb-sclient does the same)."""
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
