"""What an export offers on the command line: its formats, named by a file's suffix, and the
percentiles a terminal prints. Apart from harness.analysis.export, which writes them, so that
a command's flags need not import pandas."""

from __future__ import annotations

from pathlib import Path

SUFFIXES = (".md", ".csv", ".json")
# The percentiles a terminal shows (wrk's --latency, wrk2's: the median to the tail); 100: the
# largest response
PERCENTILES = (50.0, 75.0, 90.0, 99.0, 99.9, 99.99, 100.0)
PERCENTILE_COLUMNS = tuple(f"p{p:g}" for p in PERCENTILES)  # p50 ... p100


class ExportError(ValueError):
    """A file the tables cannot be written to (its suffix, its folder)."""


def check_path(text: str) -> Path:
    """An export file named on the command line: its suffix says the format."""
    path = Path(text)
    if path.suffix not in SUFFIXES:
        raise ExportError(f"{text}: name the format by the suffix: {', '.join(SUFFIXES)}")
    return path
