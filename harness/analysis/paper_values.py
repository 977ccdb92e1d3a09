"""The papers' own numbers, one CSV per paper under harness/analysis/papers/, as tidy rows.

Each row is one value a paper gives for one reproduction target (a FigureSpec id), in our
column names and units so that it can be drawn beside, and checked against, our curves:

    figure   FigureSpec id (harness.analysis.figures.BY_ID), e.g. bmd99-fig8
    facet    "all" or "column=value[, column=value]" as prepare.py labels facets
    series   "all" or "column=value[, ...]" as prepare.py labels series (dispatch=select)
    metric   the FigureSpec y column the value belongs to (reply_rate_rps)
    x        value on the FigureSpec's x axis (cold_conns); for profiles, the symbol
    value    the paper's number, in the unit of `metric`
    source   where in the paper: "§4.2 text", "Table 2", "Fig. 8"
    read_off true when read off a plot (approximate), false when printed in text or a table
    note     anything a reader needs (the paper's own label for the series, its hardware)
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pandas as pd

PAPERS_DIR = Path(__file__).with_name("papers")
COLUMNS = ["figure", "facet", "series", "metric", "x", "value", "source", "read_off", "note"]


class PaperValuesError(ValueError):
    """A papers/*.csv file that does not follow the format above."""


def _read(path: Path) -> pd.DataFrame:
    frame = pd.read_csv(path, dtype={"x": str, "facet": str, "series": str}, keep_default_na=False)
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise PaperValuesError(f"{path}: missing column(s) {', '.join(missing)}")
    frame["value"] = pd.to_numeric(frame["value"], errors="raise")
    frame["read_off"] = frame["read_off"].astype(str).str.lower().map({"true": True, "false": False})
    if frame["read_off"].isna().any():
        raise PaperValuesError(f"{path}: read_off must be true or false")
    frame["paper"] = path.stem
    return frame


@cache
def all_values() -> pd.DataFrame:
    """Every paper's values, one row each (COLUMNS plus `paper`, the CSV's stem)."""
    frames = [_read(path) for path in sorted(PAPERS_DIR.glob("*.csv"))]
    if not frames:
        return pd.DataFrame(columns=[*COLUMNS, "paper"])
    return pd.concat(frames, ignore_index=True)


def for_figure(figure: str) -> pd.DataFrame:
    """The paper's values for one FigureSpec id; x is numeric where the axis is numeric."""
    rows = all_values()
    rows = rows[rows["figure"] == figure].copy()
    numeric = pd.to_numeric(rows["x"], errors="coerce")
    if numeric.notna().all():
        rows["x"] = numeric
    return rows.reset_index(drop=True)
