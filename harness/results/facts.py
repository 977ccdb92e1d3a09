"""A points row's window facts for clients.validity's rules, each read from the column the
results format declares for it (harness.results.format: FACT_COLUMNS, WINDOW_COLUMNS)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from clients import validity
from harness.results.format import (
    FACT_COLUMN_NAMES,
    FACT_COLUMNS,
    WINDOW_SOURCES,
    ResultsFormatError,
    edge_column,
)


class MissingFactColumn(ResultsFormatError):
    """A points row lacks a column a validity rule reads: its rule would be off unseen."""


def check_fact_columns(row: Mapping[str, Any], where: str) -> None:
    """Every declared fact column is in row (null where not measured); else the missing
    ones, by name."""
    missing = [name for name in FACT_COLUMN_NAMES if name not in row]
    if missing:
        raise MissingFactColumn(
            f"{where}: no column {', '.join(missing)}, which the validity rules read "
            f"(harness/results/format.py: FACT_COLUMNS, WINDOW_COLUMNS); the recorder must "
            f"write each of them, null where it measured none")


def window_facts(row: Mapping[str, Any], setup: validity.WindowFacts,
                 where: str) -> validity.WindowFacts:
    """setup (how the point was set up: its CPUs, server, stream, emulation, cold
    connections asked) with what row measured over the window: each fact from its column."""
    check_fact_columns(row, where)
    return dataclasses.replace(
        setup, **{column.fact: row[column.name] for column in FACT_COLUMNS},
        edge_offsets_s=edge_offsets_s(row))


def edge_offsets_s(row: Mapping[str, Any]) -> dict[str, tuple[float, float]]:
    """Each source's (start, end) offsets from the runner's edges in s, from a points row's
    window columns (the sources that ran)."""
    offsets = {}
    for source in WINDOW_SOURCES:
        start, end = row[edge_column(source, "start")], row[edge_column(source, "end")]
        if start is not None and end is not None:
            offsets[source] = (start / 1e3, end / 1e3)
    return offsets
