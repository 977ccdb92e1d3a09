"""Where the repository, its built binaries, its data files and its cache live; the one answer
clients/ and harness/ both ask (it imports nothing of either)."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
BIN_DIR = Path(os.environ.get("WANBENCH_BIN", REPO_ROOT / "build" / "bin"))
CACHE_ENV = "WANBENCH_CACHE"


def cache_dir() -> Path:
    """What wanbench keeps to save time (prepared figures, probes' answers): $WANBENCH_CACHE,
    else $XDG_CACHE_HOME/wanbench, else ~/.cache/wanbench; deleting it costs only time."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "wanbench"


class MissingBinary(RuntimeError):
    pass


def binary(name: str) -> Path:
    """Path of a built wanbench binary; a clear error naming the fix when it is absent."""
    path = BIN_DIR / name
    if not path.is_file() or not os.access(path, os.X_OK):
        raise MissingBinary(f"{path} is not built; fix: run `make` in {REPO_ROOT}")
    return path
