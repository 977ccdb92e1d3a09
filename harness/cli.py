"""`wanbench` command line: one subcommand per stage, each registered by its own module."""

from __future__ import annotations

import argparse
import importlib
import sys

import harness
from harness import interrupts

# This module imports nothing more at its top: until main() runs, a stop signal kills the
# process by the signal (SIGTERM) or prints a traceback (SIGINT), so the time to main() is
# kept to the interpreter's own start-up. harness.commands (rich) comes with the parser.
# command -> module defining register(subparsers); the handler is stored as the `func`
# default and returns the exit code. Only the invoked command's module is imported, so a
# command does not pay for the others' imports (pandas, matplotlib, scipy).
COMMANDS = {
    "server": "harness.commands.server",
    "load": "harness.commands.load",
    "topo": "harness.commands.topo",
    "run": "harness.commands.run",
    "doctor": "harness.commands.doctor",
    "plot": "harness.commands.plot",
    "compare": "harness.commands.compare",
    "noise": "harness.commands.noise",
    "reproduce": "harness.commands.reproduce",
    "worker": "harness.commands.worker",
    "cluster": "harness.commands.cluster",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    from harness.commands import add_verbosity
    parser = argparse.ArgumentParser(
        prog="wanbench",
        description="Load generation and WAN emulation for event-driven servers.",
    )
    parser.add_argument("--version", action="version", version=f"wanbench {harness.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command, module in COMMANDS.items():
        if only is None or command == only:
            importlib.import_module(module).register(sub)
    for command_parser in sub.choices.values():
        add_verbosity(command_parser)
    _describe_from_help(parser)
    return parser


def _describe_from_help(parser: argparse.ArgumentParser) -> None:
    """A (sub)command's --help opens with a description: the line its listing shows, unless
    it has a longer one of its own."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for listed in action._choices_actions:
                command = action.choices[listed.dest]
                command.description = command.description or listed.help
                _describe_from_help(command)


def _unknown_command(name: str) -> int:
    """argparse names every command but not the one meant; exit 2 as its own errors do."""
    from harness.yamlfile import choices, quote

    print(f"wanbench: no command {quote(name)}; {choices(name, list(COMMANDS), 'commands')} "
          f"(wanbench COMMAND --help)", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    # A stop signal raises Interrupted from here on: importing a command takes a second or
    # more, and a signal then was a KeyboardInterrupt traceback or a silent death by SIGTERM.
    # Commands that handle signals themselves (the run's event loop, `wanbench server`)
    # install their own handlers over these.
    # The try holds the with: a signal that lands while the handlers go in is caught too.
    try:
        with interrupts.raising():
            argv = sys.argv[1:] if argv is None else argv
            first = next((a for a in argv if not a.startswith("-")), None)
            if first is not None and first not in COMMANDS:
                return _unknown_command(first)
            parser = build_parser(first if first in COMMANDS else None)
            args = parser.parse_args(argv)
            return int(args.func(args) or 0)
    except interrupts.Interrupted as exc:
        print(f"wanbench: {exc.reason}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:  # SIGINT where a command put Python's own handler back
        print("wanbench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
