"""A point starts with this host's dirty pages written out (harness.metrics.writeback): a fresh
build's, left to the kernel, were written out in 5 s bursts through `make demo`'s first round,
their I/O completions on the generator's CPU (docs/validity.md)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from harness.metrics import writeback


def test_a_points_start_writes_dirty_pages_out(tmp_path: Path):
    big = tmp_path / "fresh-build"
    with big.open("wb") as out:
        for _ in range(64):
            out.write(os.urandom(1 << 20))
    # 64 MiB written and not synced: dirty (the kernel starts on its own only after 30 s, or
    # past dirty_background_ratio of memory: 2.4 GB of 24 GB here)
    assert writeback.unwritten_mib() >= 48
    assert asyncio.run(writeback.write_out()) >= 48
    assert writeback.unwritten_mib() < 16


def test_unwritten_counts_dirty_and_writeback_pages(tmp_path: Path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 24000000 kB\nDirty:  2048 kB\nWriteback:  1024 kB\n"
                       "WritebackTmp:  512 kB\n")
    assert writeback.unwritten_mib(meminfo) == 3.0
