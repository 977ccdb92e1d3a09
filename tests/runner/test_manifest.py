"""The manifest's last-level cache: the highest level sysfs lists, in bytes."""

from __future__ import annotations

from pathlib import Path

from harness.manifest import last_level_cache_bytes


def _cache(root: Path, index: int, level: int, size: str) -> None:
    (root / f"index{index}").mkdir(parents=True)
    (root / f"index{index}" / "level").write_text(f"{level}\n")
    (root / f"index{index}" / "size").write_text(f"{size}\n")


def test_the_highest_level_is_the_last_level_cache(tmp_path: Path):
    for index, level, size in ((0, 1, "48K"), (1, 1, "32K"), (2, 2, "2048K"), (3, 3, "260M")):
        _cache(tmp_path, index, level, size)
    assert last_level_cache_bytes(tmp_path) == 260 * 2**20


def test_no_cache_listed_is_none(tmp_path: Path):
    assert last_level_cache_bytes(tmp_path) is None
    _cache(tmp_path, 0, 1, "unknown")
    assert last_level_cache_bytes(tmp_path) is None
