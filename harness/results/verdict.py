"""The verdict a points row stored, read back: valid, its reasons' codes and sentences, and
whether they were all interference (docs/results-format.md; written by
harness.results.rows.verdict_columns). Every reader of a run asks this module; a row without
a verdict (null, or no `valid` column at all) is never valid."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.results.format import CODE_SEPARATOR


@dataclass(frozen=True)
class StoredVerdict:
    valid: bool
    codes: tuple[str, ...]  # clients.validity codes, in the order of the sentences
    reason: str | None  # the sentences, joined; None when valid or none was recorded
    interference_only: bool


def valid(points: pd.DataFrame) -> pd.Series:
    """Per row of points, whether its stored verdict says valid (a plain bool)."""
    if "valid" not in points:
        return pd.Series(False, index=points.index, dtype=bool)
    return points["valid"].astype("boolean").fillna(False).astype(bool)


def verdicts(points: pd.DataFrame) -> list[StoredVerdict]:
    """Each row's stored verdict, in the rows' order."""
    def column(name: str) -> pd.Series:
        return points[name] if name in points else pd.Series(None, index=points.index)

    interference_only = column("interference_only").astype("boolean").fillna(False)
    return [StoredVerdict(bool(ok), _codes(codes), reason if isinstance(reason, str) else None,
                          bool(only))
            for ok, codes, reason, only in zip(valid(points), column("invalid_codes"),
                                               column("invalid_reason"), interference_only,
                                               strict=True)]


def _codes(stored: object) -> tuple[str, ...]:
    return tuple(stored.split(CODE_SEPARATOR)) if isinstance(stored, str) and stored else ()
