"""The command-line face of every `wanbench` subcommand, one module each.

A module here holds register(subparsers) and its handler, nothing else: flags, exit codes
and printing. What a command does lives in its domain package (harness.servers, clients,
harness.topology, harness.runner, ...); harness.cli imports only the module invoked.
"""
