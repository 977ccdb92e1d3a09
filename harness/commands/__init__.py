"""The command-line face of every `wanbench` subcommand, one module each.

A module here holds register(subparsers) and its handler, nothing else: flags, exit codes
and printing. What a command does lives in its domain package (harness.servers, clients,
harness.topology, harness.runner, ...); harness.cli imports only the module invoked.
"""


def error_text(exc: Exception) -> str:
    """An error as one line naming the problem and the fix; a file that could not be read or
    written names its path."""
    if isinstance(exc, OSError):
        return f"{exc.filename or ''}: {exc.strerror or exc}; check the path and permissions"
    return str(exc)
