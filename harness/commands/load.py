"""`wanbench load`: run one load generator against a target and summarise its result."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from clients import GeneratorFailed, LoadSpec, command, parse_result, run
from clients.paths import MissingBinary
from clients.spec import add_arguments, load_options
from clients.targets import TargetRefused
from harness.analysis.numbers import metric
from harness.cluster import ClusterError
from harness.cluster.security import Access, access
from harness.commands import error_text
from harness.commands.cluster import add_access_options
from harness.procs import forwarding_signals


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "load", help="run a load generator (sclient, asyncio, httperf, wrk, wrk2)",
        description="Run one load generator and write its result document (clients/SCHEMA.md).")
    add_arguments(p, load_options())
    p.add_argument("--json", metavar="PATH",
                   help="write the result document here; - for standard output (the summary "
                        "then goes to standard error)")
    p.add_argument("--cluster", metavar="tls://HOST:PORT",
                   help="split the load over the Dask workers of --role (several hosts) and "
                        "merge their documents")
    add_access_options(p)
    p.add_argument("--role", default="hot", help="with --cluster: the workers' role (hot)")
    p.set_defaults(func=handle)


def spec_from_args(args: argparse.Namespace, json_path: str) -> LoadSpec:
    return LoadSpec(**{f.name: getattr(args, f.name) for f in load_options()},
                    json_path=json_path)


def hold(spec: LoadSpec) -> dict[str, Any]:
    """Cold-only hold until Ctrl-C: relay the generator's events, stop it, read its result."""
    # On SIGTERM the generator writes its result and exits, which ends its stdout.
    with forwarding_signals(lambda: subprocess.Popen(command(spec), stdout=subprocess.PIPE,
                                                     text=True),
                            (signal.SIGINT, signal.SIGTERM), send=signal.SIGTERM) as proc:
        for line in proc.stdout or ():
            print(line.rstrip(), flush=True)
        proc.wait()
    return parse_result(spec, "", "")


def summary(doc: dict[str, Any]) -> str:
    """The result document for people: rates whole, times in their unit (µs, ms, s), only
    the errors that happened."""
    corrected, uncorrected = doc["latency"]["corrected"], doc["latency"]["uncorrected"]
    cold = doc["cold"]
    errors = ", ".join(f"{name} {count:,}" for name, count in doc["errors"].items() if count)
    lines = [
        f"{doc['generator']}: {'valid' if doc['valid'] else 'NOT VALID'} over "
        f"{metric('duration_s', doc['duration_s'])}",
        f"  offered {metric('offered_rate_rps', doc['offered_rate_rps'])} req/s, sent "
        f"{metric('request_rate_rps', doc['request_rate_rps'])} req/s, replies "
        f"{metric('reply_rate_rps', doc['reply_rate_rps'])}/s",
        f"  errors: {errors or 'none'}",
    ]
    for name, latency in (("corrected", corrected), ("uncorrected", uncorrected)):
        if latency.get("p50_us") is not None:
            lines.append(f"  latency {name}: p50 {metric('p50_us', latency['p50_us'])}, "
                         f"p99 {metric('p99_us', latency['p99_us'])}")
    if doc["late_sends"] is not None:
        lines.append(f"  late sends {doc['late_sends']:,}, max slip "
                     f"{metric('max_schedule_slip_us', doc['max_schedule_slip_us'])}")
    if cold.get("requested"):
        lines.append(f"  cold: {cold['established']} established, {cold['held']} held, "
                     f"{cold['reconnected']} reconnected, {cold['failed']} failed")
    if doc.get("stream"):
        lines.append(f"  stream: {metric('achieved_mbps', doc['stream']['achieved_mbps'])} "
                     f"Mbit/s")
    lines += [f"  not valid: {reason}" for reason in doc["invalid_reasons"]]
    return "\n".join(lines)


def on_cluster(spec: LoadSpec, scheduler: Access, role: str) -> dict[str, Any]:
    """spec split over the role's workers; each host's start and clock printed as it went."""
    from harness.cluster.coordinator import connect, run_load

    if spec.duration_s == 0:
        raise ValueError("--cluster runs a measured window: give --duration > 0")
    with connect(scheduler) as client:  # the targets are checked before any worker starts
        load = run_load(client, spec, role,
                        lambda message: print(f"wanbench load: {message}", file=sys.stderr))
    for host, clock in load.clocks.items():
        started = load.started[host]
        first = ("no request sent" if started.first_request_lag_s is None else
                 f"first request {started.first_request_lag_s * 1e3:.1f} ms")
        print(f"{host}: clock {clock.offset_s * 1e3:+.2f} ms (± {clock.uncertainty_s * 1e3:.2f}),"
              f" launched {started.start_lag_s * 1e3:.1f} ms and {first} after the scheduled"
              f" time")
    return load.document


def handle(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="wb-load-") as tmp:
        try:
            spec = spec_from_args(args, os.path.join(tmp, "result.json"))
            if args.cluster:
                doc = on_cluster(spec, access(args.cluster, args.certs, args.insecure),
                                 args.role)
            else:
                spec.resolved_targets()  # refused before anything runs, whatever the tool
                doc = hold(spec) if spec.duration_s == 0 else run(spec)
        except (TargetRefused, ValueError, GeneratorFailed, FileNotFoundError,
                MissingBinary, ClusterError) as exc:
            print(f"wanbench load: {exc}", file=sys.stderr)
            return 2
    text = json.dumps(doc, indent=1) + "\n"
    if args.json == "-":
        print(summary(doc), file=sys.stderr)
        sys.stdout.write(text)
        return 0 if doc["valid"] else 1
    print(summary(doc))
    if args.json:
        try:
            Path(args.json).write_text(text)
        except OSError as exc:
            print(f"wanbench load: {error_text(exc)}", file=sys.stderr)
            return 2
        print(f"result: {args.json}")
    return 0 if doc["valid"] else 1
