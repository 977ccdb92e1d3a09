"""What a run may have left, looked for the way a test must: by name, whatever a ledger says."""

from __future__ import annotations

import os
from pathlib import Path

from harness.topology.cleanup import EMULATOR
from harness.topology.ledger import process_exe
from harness.topology.netns import NETNS_DIR


def emulator_pids(prefix: str) -> list[int]:
    """wb-linkem processes (by executable) whose arguments name a namespace of this prefix:
    what a test looks for, whatever the ledger says (clean itself never searches by name)."""
    marker = f"{NETNS_DIR}/{prefix}-"
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        exe = process_exe(int(entry.name))
        if exe is None or Path(exe).name != EMULATOR:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(os.fsdecode(a).startswith(marker) for a in argv[1:]):
            pids.append(int(entry.name))
    return pids
