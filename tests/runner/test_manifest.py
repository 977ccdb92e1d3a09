"""The manifest's last-level cache (the highest level sysfs lists, in bytes) and its
revision (dirty for changed code, not for what runs write)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness import manifest
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


def test_the_revision_is_dirty_for_code_not_for_what_runs_write(tmp_path: Path, monkeypatch):
    """`make reproduce` rewrites results/ and REPRODUCTION.md; `make beyond` after it must
    still be from the clean revision. Any other tracked change makes it dirty."""
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    for name in ("harness.py", "REPRODUCTION.md", "results/reference/run/points.json"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("first\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    monkeypatch.setattr(manifest, "REPO_ROOT", tmp_path)
    head = manifest.git_revision()
    assert head is not None and not head.endswith("-dirty")
    (tmp_path / "results/reference/run/points.json").unlink()
    (tmp_path / "REPRODUCTION.md").write_text("regenerated\n")
    (tmp_path / "notes.txt").write_text("untracked\n")
    assert manifest.git_revision() == head
    (tmp_path / "harness.py").write_text("changed\n")
    assert manifest.git_revision() == f"{head}-dirty"
