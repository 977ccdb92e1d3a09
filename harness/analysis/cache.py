"""Prepared figures, point tables and drawn figure files, kept between `wanbench plot`s under
what they were made from: the content of the runs (RunSet.fingerprints), the code (every source
file of harness/ and clients/, the papers' values), the libraries' versions and matplotlib's
settings. A key names all of that, so a changed run or changed code finds no entry: nothing
cached can be stale. Entries are written atomically (readers see a whole entry or none, and
concurrent writers of one key write the same bytes); an entry that cannot be read is a miss.

Where: clients.paths.cache_dir.
"""

from __future__ import annotations

import functools
import hashlib
import json
import pickle
import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

import matplotlib

from clients.atomic import write_atomic
from clients.paths import REPO_ROOT, cache_dir
from harness.results.runset import RunSet

# What the prepared data and the figures are made with, besides our own code.
LIBRARIES = ("pandas", "numpy", "pyarrow", "scipy", "matplotlib", "hdrhistogram")
CODE_GLOBS = (("harness", "*.py"), ("clients", "*.py"), ("harness/analysis/papers", "*.csv"))


def _digest(parts: Iterable[str | bytes]) -> str:
    content = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        content.update(len(data).to_bytes(8, "little") + data)  # length-prefixed: unambiguous
    return content.hexdigest()


@functools.cache
def code_version() -> str:
    """Every source file that prepares or draws, the libraries' versions and matplotlib's
    settings (a user's matplotlibrc), as one hash."""
    files = sorted(path for folder, pattern in CODE_GLOBS
                   for path in (REPO_ROOT / folder).rglob(pattern))
    return _digest([sys.version, *(f"{lib} {metadata.version(lib)}" for lib in LIBRARIES),
                    repr(sorted(matplotlib.rcParams.items())),
                    *(part for path in files
                      for part in (str(path.relative_to(REPO_ROOT)), path.read_bytes()))])


def scenario_key(runs: RunSet, scenario: str, what: str) -> str | None:
    """The key of `what` (a figure spec, a table) made from `runs`' runs of `scenario`, in
    their order; None when one of them has no fingerprint (read from its records)."""
    mine = runs.scenario(scenario)
    fingerprints = [runs.fingerprints.get(run_id) for run_id in mine.manifests["run_id"]]
    if any(f is None for f in fingerprints):
        return None
    return _digest([code_version(), what, *fingerprints])


class Cache:
    """Entries by key under `root`; `read` False: compute afresh (entries are still written)."""

    def __init__(self, root: Path | None = None, read: bool = True):
        self.root = cache_dir() if root is None else root
        self.read = read

    def _path(self, kind: str, key: str) -> Path:
        return self.root / kind / key[:2] / key

    def load(self, key: str | None) -> Any | None:
        """The value stored under key, or None (no key, not reading, absent or unreadable)."""
        if key is None or not self.read:
            return None
        try:
            return pickle.loads(self._path("prepared", key).read_bytes())
        except Exception:  # absent, truncated by a full disk, or from an older pickle: a miss
            return None

    def store(self, key: str | None, value: Any) -> None:
        if key is None:
            return
        try:
            write_atomic(self._path("prepared", key), pickle.dumps(value))
        except OSError:
            pass  # a cache that cannot be written only costs the next plot its time

    def _drawn_path(self, figure_dir: Path, figure_id: str) -> Path:
        return self._path("drawn", _digest([str(figure_dir.resolve()), figure_id]))

    def drawn(self, key: str | None, figure_dir: Path, figure_id: str) -> bool:
        """Whether figure_dir holds the files drawn for key, untouched since (same inode, size
        and modification time as when they were moved into place)."""
        if key is None or not self.read:
            return False
        try:
            stamp = json.loads(self._drawn_path(figure_dir, figure_id).read_bytes())
            return stamp["key"] == key and all(
                identity(figure_dir / name) == drawn for name, drawn in stamp["files"].items())
        except (OSError, ValueError, KeyError, TypeError):
            return False

    def record_drawn(self, key: str | None, figure_dir: Path, figure_id: str,
                     files: dict[str, list[int]]) -> None:
        """figure_dir's files of figure_id, by name: their identity, taken before they were
        moved into place (so that a concurrent writer's file is never taken for ours)."""
        if key is None:
            return
        try:
            write_atomic(self._drawn_path(figure_dir, figure_id),
                         json.dumps({"key": key, "files": files}).encode())
        except OSError:
            pass


def identity(path: Path) -> list[int]:
    """What `Cache.drawn` compares: inode, size and modification time (a rename keeps them)."""
    stat = path.stat()
    return [stat.st_ino, stat.st_size, stat.st_mtime_ns]
