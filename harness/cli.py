"""`wanbench` command line: one subcommand per stage, each registered by its own module."""

from __future__ import annotations

import argparse
import importlib
import sys

# Each module defines register(subparsers); its handler is stored as the `func` default and
# returns the process exit code.
COMMAND_MODULES = (
    "harness.servers",
    "harness.load",
    "harness.topology.cli",
    "harness.run_cmd",
    "harness.doctor",
    "harness.analysis.cli",
    "harness.compare",
    "harness.demo",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="wanbench",
        description="Load generation and WAN emulation for event-driven servers.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue  # a stage not built yet in this checkout
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("wanbench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
