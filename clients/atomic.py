"""Atomic file replacement: readers see the old file or the new one, never half of either.

At the bottom of the tree: generators write their result with it, harness/ its records and
tables. The temporary beside the target is named `.<target>.<random><TEMPORARY_SUFFIX>`, so
that one left by a kill is recognised as this module's (is_temporary) and nothing else is."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

TEMPORARY_SUFFIX = ".wanbench-tmp"


def temporary_prefix(path: Path) -> str:
    """How the names of path's temporaries begin (hidden, beside it)."""
    return f".{path.name}."


def is_temporary(path: Path) -> bool:
    """A temporary of replacing(): what a kill during an atomic write leaves behind."""
    return path.name.startswith(".") and path.name.endswith(TEMPORARY_SUFFIX)


def leftovers(path: Path) -> list[Path]:
    """path's temporaries that writes killed before their rename left behind."""
    return sorted(p for p in path.parent.glob(f"{temporary_prefix(path)}*") if is_temporary(p))


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary path to write path's new content to; on leaving it is synced and renamed
    over path, or removed if the writing failed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temporary_prefix(path),
                               suffix=TEMPORARY_SUFFIX)
    os.close(fd)
    try:
        yield Path(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(path: Path, data: bytes) -> None:
    """Write via a temporary file in the same directory, fsync, and rename over path."""
    with replacing(path) as tmp:
        tmp.write_bytes(data)
