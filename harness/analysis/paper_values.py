"""The papers' own numbers, one CSV per paper under harness/analysis/papers/, as tidy rows.

Each row is one value a paper gives for one reproduction target (a FigureSpec id), in our
column names and units so that it can be drawn beside, and checked against, our curves:

    figure   FigureSpec id (harness.analysis.figures.BY_ID), e.g. bmd99-fig8
    facet    "all" or "column=value[, column=value]" as prepare.py labels facets
    series   "all" or "column=value[, ...]" as prepare.py labels series (dispatch=select)
    metric   the FigureSpec y column the value belongs to (reply_rate_rps), or its x column
             for a position on the x axis (a saturation request rate: x and value equal)
    x        value on the FigureSpec's x axis (cold_conns); for profiles, the symbol
    value    the paper's number, in the unit of `metric` (scale absolute, other_units) or as a
             ratio to the value at the curve's first point (ratio_to_first)
    scale    absolute: drawn on our axis as it is (the units agree); ratio_to_first: the
             paper gives a change, drawn on our axis as our curve's first point times the
             ratio, which is how the check compares (claims.ratio_across); other_units: a
             quantity whose unit differs from ours (counts over a run of another length),
             drawn on a right axis of its own; slope: a least-squares line's slope (the
             unit of `metric` per unit of x) from a paper's regression table, named beside
             our fitted lines (x: "slope", no position on the axis)
    source   where in the paper: "§4.2 text", "Table 2", "Fig. 8"
    read_off true when read off a plot (approximate), false when printed in text or a table
    note     anything a reader needs (the paper's own label for the series, its hardware)
"""

from __future__ import annotations

import csv
from functools import cache
from pathlib import Path

import pandas as pd

# Mechanisms the papers measured that no Linux kernel has: a claim about them is never
# testable here, whatever the machine.
ABSENT_FROM_LINUX = {
    "dev_poll": "/dev/poll (Solaris; its Linux 2.4 port was never merged): wanbench's devpoll "
                "backend is an epoll-backed stand-in whose cost does not grow with connections",
    "signal_per_fd": "signal-per-fd (Chandra & Mosberger's Linux 2.4 patch, never merged; "
                     "F_SETSIG still queues one signal per event)",
}

PAPERS_DIR = Path(__file__).with_name("papers")
COLUMNS = ["figure", "facet", "series", "metric", "x", "value", "scale", "source", "read_off",
           "note"]
SCALES = ("absolute", "ratio_to_first", "other_units", "slope")


class PaperValuesError(ValueError):
    """A papers/*.csv file that does not follow the format above."""


def _read(path: Path) -> pd.DataFrame:
    # csv, not pd.read_csv: pandas takes a row with one field too many as an index and
    # shifts every column silently, and fills short rows with blanks.
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle)
            rows = [(reader.line_num, row) for row in reader if row]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise PaperValuesError(f"{path}: {exc}") from exc
    if not rows:
        raise PaperValuesError(f"{path}: empty, not even a header")
    header, body = rows[0][1], [row for _, row in rows[1:]]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise PaperValuesError(f"{path}: missing column(s) {', '.join(missing)}")
    for line, row in rows[1:]:
        if len(row) != len(header):
            raise PaperValuesError(
                f"{path}: line {line} has {len(row)} fields, the header {len(header)}"
            )
    frame = pd.DataFrame(body, columns=header, dtype=str)
    for column in ("figure", "facet", "series", "metric", "x", "source"):
        if (frame[column].str.strip() == "").any():
            raise PaperValuesError(f"{path}: empty {column}")
    value = pd.to_numeric(frame["value"], errors="coerce")
    bad = value.isna() | value.isin([float("inf"), float("-inf")])
    if bad.any():
        raise PaperValuesError(f"{path}: value must be a number: {frame['value'][bad].iloc[0]!r}")
    frame["value"] = value.astype(float)
    flags = {"true": True, "false": False}
    frame["read_off"] = frame["read_off"].str.strip().str.lower().map(flags)
    if frame["read_off"].isna().any():
        raise PaperValuesError(f"{path}: read_off must be true or false")
    unknown = ~frame["scale"].isin(SCALES)
    if unknown.any():
        raise PaperValuesError(f"{path}: scale must be one of {', '.join(SCALES)}: "
                               f"{frame['scale'][unknown].iloc[0]!r}")
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
    """The paper's values for one FigureSpec id; x is numeric where the axis is numeric
    (a slope's x, which has no position, is then NaN)."""
    rows = all_values()
    rows = rows[rows["figure"] == figure].copy()
    numeric = pd.to_numeric(rows["x"], errors="coerce")
    if numeric[rows["scale"] != "slope"].notna().all():
        rows["x"] = numeric
    return rows.reset_index(drop=True)
