"""Fixtures for the analysis tests: synthetic run directories and a parser for one command."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

import pytest

from .synthetic import write_all_scenarios


@pytest.fixture(scope="session")
def synthetic_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One synthetic run per reproduction scenario, under one results folder."""
    root = tmp_path_factory.mktemp("results")
    write_all_scenarios(root)
    return root


def run_command(module: str, argv: list[str]) -> int:
    """Run one wanbench subcommand through its own register() and handler."""
    parser = argparse.ArgumentParser(prog="wanbench")
    importlib.import_module(module).register(parser.add_subparsers(required=True))
    args = parser.parse_args(argv)
    return args.func(args)
