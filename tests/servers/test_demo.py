"""`wanbench demo` (the interim main job) on a small scale: a table, nothing left running."""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

import pytest

from harness import demo


def children_named(name: str) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)
        except OSError:
            continue
        if fields[0].endswith(f"({name}") and int(fields[1].split()[1]) == os.getpid():
            found.append(int(stat.parent.name))
    return found


def test_demo_prints_a_row_per_backend_and_idle_level(normal_binary: Path, capsys) -> None:
    if shutil.which("wrk") is None:
        pytest.skip("wrk is not installed; fix: run `make system-deps`")
    parser = argparse.ArgumentParser()
    demo.register(parser.add_subparsers())
    args = parser.parse_args(["demo", "--seconds", "1", "--idle", "300",
                              "--dispatch", "poll", "rtsig"])
    assert args.func(args) == 0
    table = capsys.readouterr().out.split("events/call")[-1].strip().splitlines()
    assert [row.split()[:2] for row in table] == [["poll", "0"], ["poll", "300"],
                                                  ["rtsig", "0"], ["rtsig", "300"]]
    assert all(float(row.split()[2]) > 0 for row in table)
    assert children_named("wb-server") == [] and children_named("wrk") == []
