"""The papers' own numbers (harness/analysis/papers/*.csv): every row names a figure spec of
its paper, a metric that spec plots, labels in that spec's columns and a place in the paper;
a malformed file is refused, not read half-way."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis import derive, paper_values
from harness.analysis.figures import BY_ID, PAPERS, FigureSpec
from harness.analysis.paper_values import COLUMNS, PaperValuesError

# Metrics a spec's source derives rather than reads from its y columns.
SOURCE_METRICS = {
    "saturation": ("saturation_rps",),
}
# prepare.py adds this series column when runs of one scenario differ by kernel; rows for
# the papers' modified kernels (no Linux counterpart) are labelled with it.
KERNEL_SERIES = ("kernel_release",)
# The layers a figure by layer draws (derive.kernel_layers), as its `layer` series names them
LAYERS = set(derive.KERNEL_LAYER_ROWS)
KEY = ["figure", "facet", "series", "metric", "x"]
PLACE = re.compile(r"§|Table|Fig\.")

GOOD_CSV = (
    "figure,facet,series,metric,x,value,scale,source,read_off,note\n"
    'cm01-table1,all,"dispatch=rtsig, cold_conns=252",sigio_overflows,3200,1526,other_units,'
    'Table 1,false,'
    '"a note, with a comma"\n'
)


def _label_columns(label: str) -> list[str]:
    """Columns of a prepare.py label ("all", or "column=value[, column=value]")."""
    if label == "all":
        return []
    columns = []
    for part in label.split(", "):
        column, sep, value = part.partition("=")
        if not sep or not column or not value or "=" in value:
            raise ValueError(f"not a column=value label: {label!r}")
        columns.append(column)
    return columns


def _in_order(columns: list[str], allowed: tuple[str, ...]) -> bool:
    """columns are some of `allowed`, each once, in allowed's order (as prepare labels them)."""
    if len(set(columns)) != len(columns) or not set(columns) <= set(allowed):
        return False
    return columns == sorted(columns, key=allowed.index)


def _row_problems(row: pd.Series) -> list[str]:
    spec: FigureSpec | None = BY_ID.get(row["figure"])
    if spec is None:
        return [f"{row['figure']!r} is no figure spec"]
    problems = []
    if spec.paper != row["paper"]:
        problems.append(f"{spec.id} belongs to paper {spec.paper}, not {row['paper']}")
    metrics = (*spec.y, *SOURCE_METRICS.get(spec.source, ()))
    position = row["metric"] == spec.x  # a rate the paper names, on the x axis
    if row["metric"] not in metrics and not position:
        problems.append(f"{spec.id} plots {metrics}, not {row['metric']!r}")
    if position and (row["scale"] != "absolute" or float(row["x"]) != row["value"]):
        problems.append(f"{spec.id}: a position on the x axis is absolute, x = value")

    try:
        facet = _label_columns(row["facet"])
        series = _label_columns(row["series"])
    except ValueError as exc:
        return [*problems, str(exc)]
    layer = dict(part.partition("=")[::2] for part in row["series"].split(", ")).get("layer")
    if layer is not None and layer not in LAYERS:
        problems.append(f"{spec.id}: series {row['series']!r} is no layer of {LAYERS}")
    if not _in_order(facet, spec.facets):
        problems.append(f"{spec.id}: facet {row['facet']!r} is not in columns {spec.facets}")
    if series and not _in_order(series, (*spec.series, *KERNEL_SERIES)):
        problems.append(f"{spec.id}: series {row['series']!r} is not in columns {spec.series}")
    slope = row["scale"] == "slope"  # a regression table's slope: no place on the x axis
    if slope and (spec.kind != "regression" or row["x"] != "slope"):
        problems.append(f"{spec.id}: a slope belongs to a regression figure, its x 'slope'")
    if not slope and pd.isna(pd.to_numeric(row["x"], errors="coerce")):
        problems.append(f"{spec.id}: x {row['x']!r} is not a number on the {spec.x} axis")
    if (row["value"] < 0 and not slope) or (row["metric"].endswith("pct") and row["value"] > 100):
        problems.append(f"{spec.id}: {row['metric']} {row['value']} is out of range")
    if not PLACE.search(row["source"]):
        problems.append(f"{spec.id}: source {row['source']!r} names no section, table or figure")
    return problems


def _changes_not_from_one(rows: pd.DataFrame) -> list[str]:
    """A change the paper gives is drawn from our curve's first point: its own curve starts
    there, at 1."""
    ratios = rows[rows["scale"] == "ratio_to_first"].assign(x=lambda r: r["x"].astype(float))
    firsts = ratios.sort_values("x").groupby(["figure", "facet", "series", "metric"])["value"]
    return [f"{key}: a change that does not start at 1"
            for key, first in firsts.first().items() if first != 1.0]


def _problems(rows: pd.DataFrame) -> list[str]:
    problems = [p for _, row in rows.iterrows() for p in _row_problems(row)]
    problems += _changes_not_from_one(rows)
    duplicated = rows[rows.duplicated(KEY, keep=False)]
    problems += [f"two values for {tuple(key)}" for key in duplicated[KEY].drop_duplicates().values]
    return problems


@pytest.fixture(scope="module")
def values() -> pd.DataFrame:
    return paper_values.all_values()


def test_one_csv_per_paper_and_every_one_loads(values: pd.DataFrame) -> None:
    stems = {path.stem for path in paper_values.PAPERS_DIR.glob("*.csv")}
    assert stems == set(PAPERS)
    assert list(values.columns) == [*COLUMNS, "paper"]
    assert set(values["paper"]) == set(PAPERS)
    assert values["value"].dtype == float
    assert values["read_off"].map(type).eq(bool).all()


def test_every_row_fits_its_figure_spec(values: pd.DataFrame) -> None:
    assert _problems(values) == []


def test_every_paper_row_says_where_and_what(values: pd.DataFrame) -> None:
    # a reader must be able to find the number, and know which mechanism it was
    assert (values["note"].str.len() > 0).all()
    for spec_id in set(values["figure"]):
        if "dispatch" in BY_ID[spec_id].series:
            notes = values.loc[values["figure"] == spec_id, "note"]
            assert notes.str.contains("paper:").all(), spec_id


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("figure", "bm98-fig99"),  # no such spec
        ("figure", "bmd99-fig8"),  # a spec of another paper
        ("metric", "reply_rate_rps"),  # not a metric of cm01-table1
        ("series", "dispatch=rtsig, reply_bytes=1"),  # not a series column of the spec
        ("series", "cold_conns=252, dispatch=rtsig"),  # not in prepare.py's order
        ("series", "dispatch rtsig"),  # not a label
        ("facet", "cold_conns=252"),  # the spec has no facets
        ("x", "many"),  # the x axis is numeric
        ("source", "somewhere"),  # no section, table or figure
    ],
)
def test_problems_catch_a_row_that_does_not_fit(field: str, bad: str) -> None:
    good = paper_values.for_figure("cm01-table1").iloc[[0]]
    assert _problems(good) == []
    assert _problems(good.assign(**{field: bad}))


def test_problems_catch_a_position_or_a_change_out_of_shape() -> None:
    knees = paper_values.for_figure("bmd99-fig9").iloc[[0]]
    assert _problems(knees) == []
    assert _problems(knees.assign(value=1000.0))  # a position is drawn where it is
    assert _problems(knees.assign(scale="ratio_to_first"))
    change = paper_values.for_figure("bm98-fig9")
    assert _problems(change) == []
    assert _problems(change.assign(value=change["value"] * 0.5))  # no longer starts at 1


def test_problems_catch_labels_and_values_out_of_place() -> None:
    share = paper_values.for_figure("bmd99-table2").iloc[[0]]
    assert _problems(share) == []
    assert _problems(share.assign(value=140.0))  # a share above 100 %
    assert _problems(pd.concat([share, share]))  # one key, two values
    layers = paper_values.for_figure("cpp-table1").iloc[[0]]
    assert _problems(layers) == []
    assert _problems(layers.assign(series="layer=TCP"))  # the paper's name, not our layer's
    assert _problems(layers.assign(series="TCP"))  # not a label
    assert _problems(layers.assign(facet="stream_conns=128"))


def test_for_figure_makes_numeric_x_numbers() -> None:
    sigio = paper_values.for_figure("cm01-table1")
    assert pd.api.types.is_numeric_dtype(sigio["x"])
    overflow = sigio[(sigio["metric"] == "sigio_overflows") & (sigio["x"] == 3200)]
    assert sorted(overflow["value"]) == [19, 1526]
    assert paper_values.for_figure("no-such-figure").empty


def test_a_good_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "good.csv"
    path.write_text(GOOD_CSV, encoding="utf-8")
    frame = paper_values._read(path)
    assert frame[COLUMNS].iloc[0].tolist() == [
        "cm01-table1", "all", "dispatch=rtsig, cold_conns=252", "sigio_overflows", "3200",
        1526.0, "other_units", "Table 1", False, "a note, with a comma",
    ]
    assert frame["paper"].iloc[0] == "good"


HEADER = "figure,facet,series,metric,x,value,scale,source,read_off,note\n"
ROW = ("cm01-table1,all,dispatch=rtsig,sigio_overflows,3200,{value},other_units,Table 1,"
       "{read_off},n\n")


@pytest.mark.parametrize(
    "text",
    [
        "",  # nothing, not even a header
        HEADER.replace(",note", "") + ROW.format(value=1, read_off="false"),  # missing column
        HEADER + ROW.format(value="many", read_off="false"),  # value not a number
        HEADER + ROW.format(value="", read_off="false"),  # value missing
        HEADER + ROW.format(value="nan", read_off="false"),
        HEADER + ROW.format(value=1, read_off="maybe"),  # read_off neither true nor false
        HEADER + ROW.format(value=1, read_off="false").replace("other_units", "relative"),
        HEADER + ROW.format(value="1,2", read_off="false"),  # unquoted comma: one field more
        HEADER + ROW.format(value=1, read_off="false").replace(",n\n", "\n"),  # one field less
        HEADER + ROW.format(value=1, read_off="false").replace("cm01-table1", ""),  # no figure
        HEADER + ROW.format(value=1, read_off="false").replace(",3200,", ",,"),  # no x
    ],
)
def test_a_malformed_file_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(PaperValuesError):
        paper_values._read(path)
