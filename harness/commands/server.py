"""`wanbench server`: run wb-server in the foreground, forwarding signals to it."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from pathlib import Path

from clients.paths import MissingBinary
from harness.procs import forwarding_signals
from harness.servers import ServerConfig

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGHUP)
# Unset flags are left out, so wb-server's own defaults apply (`wb-server --describe`).
CONFIG_FIELDS = ("dispatch", "accept", "reply_bytes", "listen", "backlog", "workers", "cpu",
                 "sink", "source_mbps", "min_wait_us", "rt_signal_queue")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("server", help="run wb-server in the foreground",
                              description="Run wb-server in the foreground, forwarding signals "
                                          "(SIGUSR1 writes a stats snapshot).")
    p.add_argument("--dispatch", help="event-dispatch backend (`wb-server --describe` lists "
                                      "them; default epoll)")
    p.add_argument("--accept", help="single, multi or N accepts per listener readiness")
    p.add_argument("--reply-bytes", type=int, metavar="B", help="bytes of each reply's body")
    p.add_argument("--listen", help="ADDR:PORT (port 0: any free port)")
    p.add_argument("--backlog", type=int, metavar="N", help="listen(2) backlog")
    p.add_argument("--stats", type=Path, help="JSON stats file (SIGUSR1, SIGTERM)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="worker processes sharing the port (SO_REUSEPORT)")
    p.add_argument("--cpu", type=int, metavar="N", help="pin the server to this CPU")
    p.add_argument("--sink", action="store_true", default=None,
                   help="read and discard, never reply")
    p.add_argument("--source", type=float, dest="source_mbps", metavar="MBPS",
                   help="send a stream of MBPS Mbit/s shared evenly over the connections, "
                        "one segment a write, and never reply (wb-sclient --stream-read reads "
                        "it)")
    p.add_argument("--min-wait-us", type=int, metavar="US",
                   help="while requests keep coming, sleep US before each wait: fewer wake-ups, "
                        "longer responses")
    p.add_argument("--rt-signal-queue", type=int, metavar="N",
                   help="lower RLIMIT_SIGPENDING to N for the server (Linux 2.4's rtsig-max was "
                        "1024): RT-signal queue overflows then come as in the papers")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    given = {name: getattr(args, name) for name in CONFIG_FIELDS
             if getattr(args, name) is not None}
    try:
        cfg = ServerConfig(stats_path=args.stats, **given)
    except (ValueError, MissingBinary) as exc:
        print(f"wanbench server: {exc}", file=sys.stderr)
        return 2
    with forwarding_signals(lambda: subprocess.Popen(cfg.argv()), FORWARDED) as proc:
        return proc.wait()
