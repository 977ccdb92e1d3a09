"""`wanbench doctor`: the machine's checks and noise sources as two tables."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from rich.console import Console
from rich.table import Table

from harness.doctor import run_checks
from harness.metrics import noise


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "doctor", help="what this machine can measure, and fixes",
        description="Check what this machine can measure (namespaces, netem or wb-linkem, perf "
                    "counters, eBPF, load generators, limits, guests) with the fix for each "
                    "shortfall, and list its noise sources (steal, isolated CPUs, governor, "
                    "IRQ affinity, kernel command line). Changes nothing. Exit 1 when an "
                    "essential capability is missing.")
    parser.add_argument("--json", action="store_true",
                        help="print the checks and noise sources as JSON on standard output")
    parser.set_defaults(func=handle)


# A value longer than this (a cloud guest's kernel command line: 700 characters, 30 lines at
# 80 columns) is cut in the table; --json has it whole.
FOLD_CHARS = 120


def folded(value: str) -> str:
    if len(value) <= FOLD_CHARS:
        return value
    return f"{value[:FOLD_CHARS]}… ({len(value) - FOLD_CHARS:,} more characters: --json)"


def handle(args: argparse.Namespace) -> int:
    results = run_checks()
    exit_status = 1 if any(c.essential and not c.ok for c in results) else 0
    if args.json:
        json.dump({"checks": [dataclasses.asdict(c) for c in results],
                   "noise_sources": [dataclasses.asdict(s) for s in noise.sources()],
                   "exit_status": exit_status}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return exit_status
    table = Table(title="wanbench doctor")
    for column in ("capability", "status", "detail", "fix"):
        table.add_column(column, overflow="fold")
    for check in results:
        status = "[green]ok[/green]" if check.ok else (
            f"[red]{check.shortfall}[/red]" if check.essential
            else f"[yellow]{check.shortfall}[/yellow]")
        table.add_row(check.name, status, check.detail, check.fix)
    Console().print(table)
    noise_table = Table(title="noise sources (nothing is changed; suggestions only)")
    for column in ("source", "now", "suggestion"):
        noise_table.add_column(column, overflow="fold")
    for source in noise.sources():
        noise_table.add_row(source.name, folded(source.value), source.suggestion or "—")
    Console().print(noise_table)
    return exit_status
