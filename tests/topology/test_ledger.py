"""A ledger killed while it is being written: `topo clean` leaves no file of it behind, and a
ledger being created by a live process is not taken for an abandoned one."""

from __future__ import annotations

import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from clients.atomic import TEMPORARY_SUFFIX
from harness.topology.ledger import Ledger
from tests.conftest import REPO

# Writes a ledger and stops for good just before the file appears under its name (the first
# write, `create`) or is replaced by its next version (`save`), printing "paused".
CUT_SHORT = """
import os, sys, time
from harness.topology.ledger import Ledger

stage, prefix = sys.argv[1:]

def pausing(original):
    def call(src, dst, *args, **kwargs):
        if os.path.basename(dst) == f"{prefix}.json":
            print("paused", flush=True)
            time.sleep(600)
        return original(src, dst, *args, **kwargs)
    return call

if stage == "create":
    os.replace, os.link = pausing(os.replace), pausing(os.link)
    Ledger.create(prefix, None, "netem")
else:
    ledger = Ledger.create(prefix, None, "netem")
    os.replace = pausing(os.replace)
    ledger.add({"kind": "netns", "name": f"{prefix}-server"})
"""


def topo_clean() -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", "topo", "clean"],
                          capture_output=True, text=True, cwd=REPO, timeout=60)


def files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.mark.parametrize("stage", ["create", "save"])
def test_a_ledger_killed_while_being_written_leaves_no_file(state_dir: Path, stage: str):
    prefix = f"wb{secrets.token_hex(3)}"
    writer = subprocess.Popen([sys.executable, "-c", CUT_SHORT, stage, prefix],
                              stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert writer.stdout.readline().strip() == "paused", writer.wait()
    assert files(state_dir)  # something of it is on disk
    writer.kill()
    writer.wait()
    out = topo_clean()
    assert out.returncode == 0, out.stderr
    assert files(state_dir) == [], out.stdout


def test_a_ledger_being_created_by_a_live_process_stays(state_dir: Path):
    prefix = f"wb{secrets.token_hex(3)}"
    writer = subprocess.Popen([sys.executable, "-c", CUT_SHORT, "create", prefix],
                              stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert writer.stdout.readline().strip() == "paused", writer.wait()
        on_disk = files(state_dir)
        out = topo_clean()
        assert out.returncode == 0, out.stderr
        assert files(state_dir) == on_disk  # its creator is alive: not abandoned
    finally:
        writer.kill()
        writer.wait()
    topo_clean()
    assert files(state_dir) == []


def test_a_removed_ledger_takes_the_files_of_its_unfinished_saves(state_dir: Path):
    ledger = Ledger.create(f"wb{secrets.token_hex(3)}", None, "netem")
    # a save cut short by a kill: write_atomic's temporary, never renamed over the ledger
    (state_dir / f".{ledger.path.name}.x1y2z3{TEMPORARY_SUFFIX}").write_text("{")
    unrelated = state_dir / f".wbother.json.x1y2z3{TEMPORARY_SUFFIX}"  # another ledger's
    unrelated.write_text("{")
    ledger.remove()
    assert files(state_dir) == [unrelated.name]
