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

from clients import GENERATORS, GeneratorFailed, LoadSpec, command, parse_result, run
from clients.paths import MissingBinary
from clients.targets import TargetRefused
from harness.procs import forwarding_signals


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "load", help="run a load generator (sclient, asyncio, httperf, wrk, wrk2)",
        description="Run one load generator and write its result document (clients/SCHEMA.md).")
    p.add_argument("--generator", choices=GENERATORS, default="sclient")
    p.add_argument("--target", action="append", required=True, metavar="HOST:PORT",
                   help="server to load (repeatable for sclient/asyncio)")
    p.add_argument("--hot-conns", type=int, default=0, metavar="N")
    p.add_argument("--rate", type=float, metavar="R", help="requests/s; omit for a closed loop")
    p.add_argument("--arrivals", choices=("fixed", "poisson"), default="fixed")
    p.add_argument("--duration", type=float, default=10.0, metavar="S",
                   help="measured seconds (0: hold cold connections until Ctrl-C)")
    p.add_argument("--warmup", type=float, default=1.0, metavar="S")
    p.add_argument("--requests-per-conn", type=int, metavar="N", help="default: persistent")
    p.add_argument("--path", default="/",
                   help="request path: starts with /, printable ASCII without @ \\ \" "
                        "(percent-encode those); the host goes in --target")
    p.add_argument("--connect-timeout", type=float, default=5.0, metavar="S")
    p.add_argument("--response-timeout", type=float, default=5.0, metavar="S")
    p.add_argument("--cold", type=int, default=0, metavar="N", help="idle connections to hold")
    p.add_argument("--cold-ramp", type=float, metavar="R", help="cold connects per second")
    p.add_argument("--cold-interval", type=float, metavar="S",
                   help="each cold connection sends one request every S seconds")
    p.add_argument("--source", metavar="LIST|CIDR", help="source addresses (comma list or CIDR)")
    p.add_argument("--stream", type=int, default=0, metavar="N", help="stream connections")
    p.add_argument("--stream-mbps", type=float, metavar="B")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--cpu", type=int, help="pin the generator to this CPU")
    p.add_argument("--workers", type=int, default=0, help="sclient shards (0: automatic)")
    p.add_argument("--spin-us", type=int, default=0, metavar="US",
                   help="sclient: poll instead of sleeping from US before each send until its "
                        "reply (µs-level latency at low rates, costs CPU); 0 (default): the "
                        "lead before each send adapts to the machine's wake-up lateness")
    p.add_argument("--coalesce-us", type=int, default=0, metavar="US",
                   help="sclient: never sleep for less (fewer wake-ups at high rates)")
    p.add_argument("--hog", action="store_true", help="httperf --hog (spins when ports run out)")
    p.add_argument("--json", type=Path, metavar="PATH", help="write the result document here")
    p.add_argument("--allow-any-target", action="store_true",
                   help="allow targets outside loopback and 198.18.0.0/15")
    p.set_defaults(func=handle)


def spec_from_args(args: argparse.Namespace, json_path: str | None) -> LoadSpec:
    source: list[str] | str | None = args.source
    if source and "/" not in source:
        source = source.split(",")
    return LoadSpec(
        generator=args.generator, targets=args.target, hot_conns=args.hot_conns,
        rate_rps=args.rate, arrivals=args.arrivals, duration_s=args.duration,
        warmup_s=args.warmup, requests_per_conn=args.requests_per_conn, path=args.path,
        connect_timeout_s=args.connect_timeout, response_timeout_s=args.response_timeout,
        cold_conns=args.cold, cold_ramp_rps=args.cold_ramp, cold_interval_s=args.cold_interval,
        source_addrs=source, stream_conns=args.stream, stream_mbps=args.stream_mbps,
        seed=args.seed, cpu=args.cpu, json_path=json_path, workers=args.workers, hog=args.hog,
        spin_us=args.spin_us, coalesce_us=args.coalesce_us,
        allow_any_target=args.allow_any_target)


def hold(spec: LoadSpec) -> dict[str, Any]:
    """Cold-only hold until Ctrl-C: relay the generator's events, stop it, read its result."""
    proc = subprocess.Popen(command(spec), stdout=subprocess.PIPE, text=True)
    # On SIGTERM the generator writes its result and exits, which ends its stdout.
    with forwarding_signals(proc, (signal.SIGINT, signal.SIGTERM), send=signal.SIGTERM):
        for line in proc.stdout or ():
            print(line.rstrip(), flush=True)
        proc.wait()
    return parse_result(spec, "", "")


def summary(doc: dict[str, Any]) -> str:
    def fmt(v: Any, unit: str = "") -> str:
        return "n/a" if v is None else (f"{v:,.1f}{unit}" if isinstance(v, float) else f"{v}{unit}")

    corrected, uncorrected = doc["latency"]["corrected"], doc["latency"]["uncorrected"]
    cold = doc["cold"]
    lines = [
        f"{doc['generator']}: {'valid' if doc['valid'] else 'NOT VALID'} over "
        f"{fmt(doc['duration_s'], ' s')}",
        f"  offered {fmt(doc['offered_rate_rps'], ' req/s')}, sent "
        f"{fmt(doc['request_rate_rps'], ' req/s')}, replies {fmt(doc['reply_rate_rps'], ' /s')}",
        f"  errors {doc['errors']}",
        f"  latency p50/p99 corrected {fmt(corrected['p50_us'])}/{fmt(corrected['p99_us'])} us, "
        f"uncorrected {fmt(uncorrected['p50_us'])}/{fmt(uncorrected['p99_us'])} us",
        f"  late sends {fmt(doc['late_sends'])}, "
        f"max slip {fmt(doc['max_schedule_slip_us'], ' us')}",
    ]
    if cold.get("requested"):
        lines.append(f"  cold: {cold['established']} established, {cold['held']} held, "
                     f"{cold['reconnected']} reconnected, {cold['failed']} failed")
    if doc.get("stream"):
        lines.append(f"  stream: {fmt(doc['stream']['achieved_mbps'], ' Mbit/s')}")
    lines += [f"  not valid: {reason}" for reason in doc["invalid_reasons"]]
    return "\n".join(lines)


def handle(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="wb-load-") as tmp:
        try:
            spec = spec_from_args(args, os.path.join(tmp, "result.json"))
            doc = hold(spec) if spec.duration_s == 0 else run(spec)
        except (TargetRefused, ValueError, GeneratorFailed, FileNotFoundError,
                MissingBinary) as exc:
            print(f"wanbench load: {exc}", file=sys.stderr)
            return 2
    print(summary(doc))
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"result: {args.json}")
    return 0 if doc["valid"] else 1
