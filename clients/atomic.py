"""Atomic file replacement: readers see the old file or the new one, never half of either.

At the bottom of the tree: generators write their result with it, harness/ its records."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def temporary_prefix(path: Path) -> str:
    """How the names of path's temporary files begin (hidden, beside it)."""
    return f".{path.name}."


def leftovers(path: Path) -> list[Path]:
    """Temporary files of path that a write killed before its rename left behind."""
    return sorted(path.parent.glob(f"{temporary_prefix(path)}*"))


def write_atomic(path: Path, data: bytes) -> None:
    """Write via a temporary file in the same directory, fsync, and rename over path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temporary_prefix(path))
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
