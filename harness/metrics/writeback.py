"""The page cache's dirty pages written out before a window, not by writeback during it.

A fresh clone's build leaves hundreds of MiB dirty (the .venv, the binaries). The kernel writes
them out once they are 30 s old (vm.dirty_expire_centisecs), in bursts every 5 s, and the
I/O's completion work (ext4_end_io_rsv_work on kworker/u*) runs on whichever CPU it lands on,
the generator's included: in `make demo`'s first round that made sends late
(docs/validity.md). Written out at the start of each point, it is done before the window."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

MEMINFO = Path("/proc/meminfo")


def unwritten_mib(meminfo: Path = MEMINFO) -> float:
    """Dirty pages and pages being written back, MiB (/proc/meminfo's kB are KiB)."""
    kb = 0
    for line in meminfo.read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("Dirty", "Writeback"):
            kb += int(value.split()[0])
    return kb / 1024


async def write_out() -> float:
    """Writes every dirty page out (sync(2)), off the event loop; the MiB that were unwritten."""
    before = unwritten_mib()
    await asyncio.to_thread(os.sync)
    return before
