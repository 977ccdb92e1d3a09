"""`wanbench server`: run wb-server in the foreground, forwarding signals to it."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from pathlib import Path

from harness.procs import forwarding_signals
from harness.servers import DISPATCHES, ServerConfig, check_accept

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGHUP)


def _accept_arg(value: str) -> str:
    try:
        return check_accept(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("server", help="run wb-server in the foreground",
                              description="Run wb-server in the foreground, forwarding signals "
                                          "(SIGUSR1 writes a stats snapshot).")
    p.add_argument("--dispatch", choices=DISPATCHES, default="epoll")
    p.add_argument("--accept", type=_accept_arg, default="multi",
                   help="single, multi or N accepts per listener readiness")
    p.add_argument("--reply-bytes", type=int, default=92)
    p.add_argument("--listen", default="127.0.0.1:0", help="ADDR:PORT (port 0: any free port)")
    p.add_argument("--backlog", type=int)
    p.add_argument("--stats", type=Path, help="JSON stats file (SIGUSR1, SIGTERM)")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--cpu", type=int)
    p.add_argument("--sink", action="store_true", help="read and discard, never reply")
    p.add_argument("--rt-signal-queue", type=int, metavar="N",
                   help="lower RLIMIT_SIGPENDING to N for the server (Linux 2.4's rtsig-max was "
                        "1024): RT-signal queue overflows then come as in the papers")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    try:
        cfg = ServerConfig(dispatch=args.dispatch, accept=args.accept,
                           reply_bytes=args.reply_bytes, listen=args.listen,
                           backlog=args.backlog, workers=args.workers, cpu=args.cpu,
                           stats_path=args.stats, sink=args.sink,
                           rt_signal_queue=args.rt_signal_queue)
    except ValueError as exc:
        print(f"wanbench server: {exc}", file=sys.stderr)
        return 2
    proc = subprocess.Popen(cfg.argv())
    with forwarding_signals(proc, FORWARDED):
        return proc.wait()
