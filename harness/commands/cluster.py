"""`wanbench cluster`: what a cluster of hosts needs besides its workers: its certificates
(`certs DIR`) and its scheduler (`scheduler`, a thin wrapper over `dask scheduler` that speaks
TLS only). The --certs/--insecure options of every command that reaches a scheduler are here
too."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from harness.cluster import ClusterError
from harness.cluster.scratch import run_dask
from harness.cluster.security import (
    CA,
    CERT,
    KEY,
    REQUIRE_ENCRYPTION_ENV,
    VALID_DAYS,
    Certs,
    listening_options,
    write,
)

SCHEDULER_PORT = 8786  # Dask's own default


def add_access_options(parser: argparse.ArgumentParser) -> None:
    """--certs and --insecure, for a command that reaches a scheduler
    (harness.cluster.security.access)."""
    parser.add_argument("--certs", type=Path, metavar="DIR",
                        help="the cluster's certificates (`wanbench cluster certs DIR`), for a "
                             "tls:// scheduler")
    parser.add_argument("--insecure", action="store_true",
                        help="allow a plain tcp:// scheduler: everyone who can reach it can "
                             "run code as root on every worker")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "cluster", help="a cluster's certificates and scheduler (several hosts)",
        description="What a cluster of hosts needs besides `wanbench worker`: the certificates "
                    "its hosts prove themselves with, and a scheduler that speaks TLS only.")
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    certs = sub.add_parser(
        "certs", help="write a new CA and the node certificate and key it signed",
        description="Write DIR/ca.pem, DIR/node.pem and DIR/node.key (mode 0600) with openssl: "
                    "a CA of the cluster's own and one node certificate every host shares; the "
                    "CA's key is discarded, so nobody can sign another. Copy DIR to every host "
                    "and to the machine that runs; whoever holds it can run code as root on "
                    "every worker.")
    certs.add_argument("directory", type=Path, metavar="DIR",
                       help="new directory for ca.pem, node.pem and node.key; copy it to every "
                            "host")
    certs.add_argument("--days", type=int, default=VALID_DAYS,
                       help="how long the certificates are valid (default: %(default)s)")
    certs.set_defaults(func=handle_certs)
    scheduler = sub.add_parser(
        "scheduler", help="run a Dask scheduler that accepts only the cluster's certificate",
        description="Run `dask scheduler` on tls://HOST:PORT with the cluster's certificates, "
                    "encryption required and no dashboard.")
    scheduler.add_argument("--certs", type=Path, metavar="DIR", required=True,
                           help="the cluster's certificates (`wanbench cluster certs DIR`)")
    scheduler.add_argument("--host", required=True, metavar="ADDR",
                           help="the one address it listens on (e.g. the server host's), its "
                                "HTTP endpoints too")
    scheduler.add_argument("--port", type=int, default=SCHEDULER_PORT,
                           help="port to listen on (default: %(default)s)")
    scheduler.add_argument("dask_args", nargs=argparse.REMAINDER,
                           help="after --: more `dask scheduler` options")
    scheduler.set_defaults(func=handle_scheduler)


def _fail(message: object) -> int:
    print(f"wanbench cluster: {message}", file=sys.stderr)
    return 2


def handle_certs(args: argparse.Namespace) -> int:
    if args.days < 1:
        return _fail(f"--days {args.days}: give at least 1")
    try:
        certs = write(args.directory, args.days)
    except (ClusterError, OSError) as exc:
        return _fail(exc)
    print(f"wrote {', '.join(str(certs.path(name)) for name in (CA, CERT, KEY))}; "
          f"copy {certs.directory} to every host of the cluster")
    return 0


def scheduler_argv(certs: Certs, host: str, port: int, more: list[str]) -> list[str]:
    return [sys.executable, "-m", "dask", "scheduler", "--protocol", "tls",
            *listening_options(host), "--port", str(port), *certs.dask_args(),
            *(a for a in more if a != "--")]


def handle_scheduler(args: argparse.Namespace) -> int:
    try:
        certs = Certs.found(args.certs)
        import distributed  # noqa: F401  # the cluster extra: say so before dask does
    except ClusterError as exc:
        return _fail(exc)
    except ImportError:
        return _fail("Dask distributed is not installed; fix: pip install 'wanbench[cluster]'")
    argv = scheduler_argv(certs, args.host, args.port, args.dask_args)
    return run_dask(argv, {**os.environ, **REQUIRE_ENCRYPTION_ENV})
