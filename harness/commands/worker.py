"""`wanbench worker`: this host joins a Dask scheduler as a worker of one role (a thin
wrapper over `dask worker`, whose other options it passes through)."""

from __future__ import annotations

import argparse
import os
import socket
import sys

from harness.cluster import ClusterError
from harness.cluster.roles import LOAD_ROLES, check_role, resource
from harness.cluster.scratch import run_dask
from harness.cluster.security import (
    REQUIRE_ENCRYPTION_ENV,
    Access,
    access,
    listening_options,
    reaching,
)
from harness.cluster.targets import ALLOW_ENV
from harness.commands.cluster import add_access_options


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "worker", help="join a Dask scheduler as a worker of one role (several hosts)",
        description="Run `dask worker` with the resource that names this host's role, one "
                    "thread (one shard at a time), no nanny (stopping it leaves nothing "
                    "behind), a scratch space of its own removed when it stops, and TLS "
                    "with the cluster's certificates: anyone holding a certificate of the "
                    "cluster's CA can run code as root here. Needs the cluster extra: "
                    "pip install 'wanbench[cluster]'.")
    p.add_argument("--scheduler", required=True, metavar="tls://HOST:PORT",
                   help="the scheduler's address (`wanbench cluster scheduler`)")
    add_access_options(p)
    p.add_argument("--role", required=True,
                   help=f"{', '.join(LOAD_ROLES)} or a topology host name")
    p.add_argument("--name", help="unique worker name (default: ROLE@HOSTNAME)")
    p.add_argument("--host", help="the one address the worker listens on (default: this "
                                  "machine's address toward the scheduler)")
    p.add_argument("--allow-any-target", action="store_true",
                   help="this worker may load any target, not only loopback and the "
                        "198.18.0.0/15 addresses of namespaces or of the run's hosts (the run "
                        "cannot grant it)")
    p.add_argument("dask_args", nargs=argparse.REMAINDER,
                   help="after --: more `dask worker` options")
    p.set_defaults(func=handle)


def worker_argv(args: argparse.Namespace, scheduler: Access) -> list[str]:
    argv = [sys.executable, "-m", "dask", "worker", scheduler.address,
            "--resources", f"{resource(args.role)}=1", "--nthreads", "1", "--no-nanny",
            "--name", args.name or f"{args.role}@{socket.gethostname()}",
            *listening_options(args.host or reaching(scheduler.address))]
    if scheduler.certs:
        argv += scheduler.certs.dask_args()
    return argv + [a for a in args.dask_args if a != "--"]


def handle(args: argparse.Namespace) -> int:
    try:
        check_role(args.role)
        scheduler = access(args.scheduler, args.certs, args.insecure)
        argv = worker_argv(args, scheduler)
        import distributed  # noqa: F401  # the cluster extra: say so before dask does
    except (ValueError, ClusterError) as exc:
        print(f"wanbench worker: {exc}", file=sys.stderr)
        return 2
    except ImportError:
        print("wanbench worker: Dask distributed is not installed; fix: "
              "pip install 'wanbench[cluster]'", file=sys.stderr)
        return 2
    env = {**os.environ, ALLOW_ENV: "1" if args.allow_any_target else "0",
           **(REQUIRE_ENCRYPTION_ENV if scheduler.certs else {})}
    return run_dask(argv, env)
