"""The command-line face of every `wanbench` subcommand, one module each.

A module here holds register(subparsers) and its handler, nothing else: flags, exit codes
and printing (`run`'s terminal is run_terminal.py's: imported once its scenario loaded). What
a command does lives in its domain package (harness.servers, clients, harness.topology,
harness.runner, ...); harness.cli imports only the module invoked.
"""

from __future__ import annotations

import argparse
import logging
import sys

from rich.console import Console
from rich.highlighter import NullHighlighter
from rich.logging import RichHandler


def error_text(exc: Exception) -> str:
    """An error as one line naming the problem and the fix; a file that could not be read or
    written names its path."""
    if isinstance(exc, OSError):
        return f"{exc.filename or ''}: {exc.strerror or exc}; check the path and permissions"
    return str(exc)


def add_verbosity(parser: argparse.ArgumentParser) -> None:
    """-q / -v, on every command (harness.cli adds them)."""
    parser.add_argument("-q", "--quiet", dest="verbosity", action="store_const", const=-1,
                        default=0, help="print warnings and results only")
    parser.add_argument("-v", "--verbose", dest="verbosity", action="store_const", const=1,
                        help="print debugging lines too")


def terminal(verbosity: int = 0) -> Console:
    """The console on standard error that the `wanbench` logger's lines go to: the standard
    logging module through rich's handler on a terminal, timed, without source paths
    (`run.py:171` told a user nothing), plain lines when piped; at the level -q / -v chose."""
    console = Console(stderr=True)
    handler: logging.Handler
    if console.is_terminal:
        handler = RichHandler(console=console, show_path=False, markup=False,
                              highlighter=NullHighlighter(), rich_tracebacks=False)
    else:  # piped (CI, a file): one unwrapped line per record, to be read by grep
        console.soft_wrap = True
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s",
                                               "%H:%M:%S"))
    log = logging.getLogger(LOGGER)
    log.handlers[:] = [handler]
    log.setLevel({-1: logging.WARNING, 0: logging.INFO, 1: logging.DEBUG}[verbosity])
    log.propagate = False
    return console


LOGGER = "wanbench"
