"""Turn loaded runs into the tidy rows one figure spec plots, or a one-line reason to skip it."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from harness.analysis import derive
from harness.analysis.figures import FigureSpec
from harness.results.runset import RunSet

PROFILE_TOP_SYMBOLS = 15  # bars in the figure
PROFILE_TABLE_ROWS = 40  # rows in the report's table
CYCLE_METRICS = ("cycles_per_packet", "layer_cycles_per_packet")
COUNTER_METRICS = ("instructions_per_packet",)
FRAME_COLUMNS = ["facet", "series", "metric", "x", "median", "low", "high"]


@dataclass
class FigureData:
    """Rows to draw (FRAME_COLUMNS), an optional table, and what the reader must be told."""

    spec: FigureSpec
    frame: pd.DataFrame
    table: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)  # metric -> why
    ylabel_suffix: dict[str, str] = field(default_factory=dict)


@dataclass
class Skipped:
    spec: FigureSpec
    reason: str


class _Skip(Exception):
    pass


def _labels(frame: pd.DataFrame, columns: list[str]) -> pd.Series:
    if not columns:
        return pd.Series("all", index=frame.index)
    parts = [frame[c].map(lambda v, c=c: f"{c}={_fmt(v)}") for c in columns]
    out = parts[0]
    for part in parts[1:]:
        out = out + ", " + part
    return out


def _fmt(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _series_columns(spec: FigureSpec, runs: RunSet) -> list[str]:
    columns = list(spec.series)
    if runs.manifests["run_id"].nunique() > 1:
        # Several runs of one scenario (e.g. two kernels) become separate series.
        by_kernel = runs.manifests["kernel_release"].nunique() == len(runs.manifests)
        columns.append("kernel_release" if by_kernel else "run_id")
    return columns


def _require(points: pd.DataFrame, columns: list[str], scenario: str) -> None:
    missing = [c for c in columns if c not in points.columns]
    if missing:
        raise _Skip(f"column(s) {', '.join(missing)} absent from the {scenario} run(s)")


def _summary_rows(
    points: pd.DataFrame, spec: FigureSpec, metrics: list[str], series: list[str]
) -> pd.DataFrame:
    group = [*spec.facets, *series, spec.x]
    frames = []
    for metric in metrics:
        summary = derive.summarize(points, group, metric)
        summary["metric"] = metric
        frames.append(summary)
    rows = pd.concat(frames, ignore_index=True)
    rows["facet"] = _labels(rows, list(spec.facets))
    rows["series"] = _labels(rows, series)
    return rows.rename(columns={spec.x: "x"})[FRAME_COLUMNS]


def _unavailable_reason(runs: RunSet, metric: str) -> str:
    if metric in COUNTER_METRICS:
        reasons = {
            (m.get("perf") or {}).get("reason") or "no hardware counters"
            for m in runs.raw_manifests.values()
        }
        return "unavailable: " + "; ".join(sorted(reasons))
    return "unavailable: no values in the run(s)"


def _label_cycles(data: FigureData, points: pd.DataFrame, series: list[str]) -> list[str]:
    """Estimated cycles are never shown as measured: label them, or split series by source."""
    if not any(m in CYCLE_METRICS for m in data.spec.y):
        return series
    sources = set(points["cycles_source"]) - {derive.CYCLES_UNAVAILABLE}
    if len(sources) > 1:
        data.notes.append("cycles: measured and estimated runs are drawn as separate series")
        return [*series, "cycles_source"]
    if sources == {derive.CYCLES_ESTIMATED}:
        for metric in CYCLE_METRICS:
            data.ylabel_suffix[metric] = " (estimated)"
        data.notes.append(
            "cycles are estimated as CPU time x TSC frequency (no hardware counters), "
            "not measured"
        )
    return series


def _from_points(data: FigureData, runs: RunSet, points: pd.DataFrame, series: list[str]) -> None:
    spec = data.spec
    _require(points, [spec.x, *spec.facets, *series], spec.scenario)
    present = []
    for metric in spec.y:
        measured = metric in points.columns
        if measured and pd.to_numeric(points[metric], errors="coerce").notna().any():
            present.append(metric)
        else:
            data.unavailable[metric] = _unavailable_reason(runs, metric)
    if not present:
        raise _Skip(f"no values for {', '.join(spec.y)} in the {spec.scenario} run(s)")
    data.frame = _summary_rows(points, spec, present, series)


def _select_share(data: FigureData, runs: RunSet, points: pd.DataFrame, series: list[str]) -> None:
    if runs.profiles.empty:
        points = points.assign(select_cpu_pct=points.get("cpu_server_pct"))
        data.notes.append(
            "no profiles.parquet: showing the whole server CPU %, an upper bound on CPU in select"
        )
    else:
        share = derive.profile_share(runs.profiles, derive.SELECT_SYMBOLS)
        points = points.merge(share, on=["run_id", "point_id", "repetition"], how="inner")
        points = points.rename(columns={"profile_pct": "select_cpu_pct"})
        data.notes.append(
            "select functions' share of perf profile samples (symbols matching "
            f"/{derive.SELECT_SYMBOLS.pattern}/)"
        )
    _from_points(data, runs, points, series)


def _saturation(data: FigureData, runs: RunSet, points: pd.DataFrame, series: list[str]) -> None:
    spec = data.spec
    by = [*spec.facets, *series, spec.x]
    _require(points, [*by, "offered_rate_rps", "reply_rate_rps"], spec.scenario)
    table = derive.saturation(points, by)
    if not table["saturated"].all():
        data.notes.append(
            "some curves never fell behind the offered rate: their saturation is a lower bound"
        )
    rows = table.assign(
        metric="saturation_rps", median=table["saturation_rps"], low=float("nan"), high=float("nan")
    )
    rows["facet"] = _labels(rows, list(spec.facets))
    rows["series"] = _labels(rows, series)
    data.frame = rows.rename(columns={spec.x: "x"})[FRAME_COLUMNS]
    data.table = table


def _regression(data: FigureData, runs: RunSet, points: pd.DataFrame, series: list[str]) -> None:
    spec = data.spec
    _require(points, [spec.x, *spec.facets, *series, *spec.y], spec.scenario)
    table = derive.regressions(points, spec.x, list(spec.y), [*spec.facets, *series])
    if table.empty:
        raise _Skip("fewer than 3 points below saturation per curve: no regression")
    below = points[points["reply_ratio"] >= derive.KEEP_UP_FRACTION]
    below = below.sort_values([*spec.facets, *series, spec.x])
    rows = below.melt(id_vars=[spec.x, *spec.facets, *series], value_vars=list(spec.y),
                      var_name="metric", value_name="median")
    rows = rows.assign(low=float("nan"), high=float("nan"))
    rows["facet"] = _labels(rows, list(spec.facets))
    rows["series"] = _labels(rows, series)
    data.frame = rows.rename(columns={spec.x: "x"})[FRAME_COLUMNS]
    table["facet"] = _labels(table, list(spec.facets))
    table["series"] = _labels(table, series)
    data.table = table[["facet", "series", "metric", "slope", "intercept", "r", "x_intercept", "n"]]
    data.notes.append(
        "regressions use points that kept up with the offered rate; the idle x-intercept "
        "(idle = 0) is a capacity estimate"
    )


def _profile_points(runs: RunSet, points: pd.DataFrame, scenario: str) -> pd.DataFrame:
    if runs.profiles.empty:
        raise _Skip(f"no profiles.parquet in the {scenario} run(s) (perf record unavailable?)")
    return runs.profiles.merge(points, on=["run_id", "point_id", "repetition"], how="inner")


def _profile(data: FigureData, runs: RunSet, points: pd.DataFrame, series: list[str]) -> None:
    spec = data.spec
    _require(points, series, spec.scenario)
    merged = _profile_points(runs, points, spec.scenario)
    merged["series"] = _labels(merged, series)
    # The papers profile the server's busy time: idle-loop samples are left out and the
    # rest scaled to 100 % of the samples that did work.
    sample = ["run_id", "point_id", "repetition"]
    idle = merged["layer"] == "idle"
    busy_pct = 100 - merged[idle].groupby(sample)["pct"].sum()
    merged = merged[~idle].join(busy_pct.rename("busy_pct"), on=sample)
    merged["pct"] = 100 * merged["pct"] / merged["busy_pct"].fillna(100)
    table = merged.groupby(["series", "symbol", "layer"])["pct"].median().reset_index()
    top = table.groupby("symbol")["pct"].max().nlargest(PROFILE_TOP_SYMBOLS).index
    rows = table[table["symbol"].isin(top)].rename(columns={"symbol": "x", "pct": "median"})
    data.frame = rows.assign(facet="all", metric="pct", low=float("nan"), high=float("nan"))[
        FRAME_COLUMNS
    ]
    pivot = table.pivot_table(index=["symbol", "layer"], columns="series", values="pct")
    top_rows = pivot.max(axis=1).nlargest(PROFILE_TABLE_ROWS).index
    data.table = pivot.loc[top_rows].reset_index()
    data.notes.append("median % of the non-idle profile samples over repetitions")


def _layers(data: FigureData, runs: RunSet, points: pd.DataFrame, series: list[str]) -> None:
    spec = data.spec
    _require(points, [spec.x, *spec.facets], spec.scenario)
    merged = derive.layer_cycles_per_packet(points, _profile_points(runs, points, spec.scenario))
    merged = merged.dropna(subset=["layer_cycles_per_packet"])
    if merged.empty:
        raise _Skip("no cycles per packet in the run(s): layers cannot be sized")
    by = [*spec.facets, *series, spec.x, "layer"]
    table = merged.groupby(by, dropna=False)["layer_cycles_per_packet"].median().reset_index()
    rows = table.assign(metric="layer_cycles_per_packet", low=float("nan"), high=float("nan"))
    rows["facet"] = _labels(rows, [*spec.facets, *series])
    rows["series"] = rows["layer"]
    rows["median"] = rows["layer_cycles_per_packet"]
    data.frame = rows.rename(columns={spec.x: "x"})[FRAME_COLUMNS]
    data.table = table.pivot_table(
        index=[*spec.facets, *series, spec.x], columns="layer", values="layer_cycles_per_packet"
    ).reset_index()


SOURCES = {
    "points": _from_points,
    "select_share": _select_share,
    "saturation": _saturation,
    "regression": _regression,
    "profile": _profile,
    "layers": _layers,
}


def prepare(spec: FigureSpec, runs: RunSet) -> FigureData | Skipped:
    """Rows for `spec` from the runs whose scenario_name is spec.scenario."""
    mine = runs.scenario(spec.scenario)
    if mine.manifests.empty:
        return Skipped(spec, f"no run of scenario {spec.scenario} among the given runs")
    points = mine.points if spec.keep_invalid else derive.valid_points(mine.points)
    invalid = len(mine.points) - len(derive.valid_points(mine.points))
    for column, values in spec.only:
        if column in points.columns:
            points = points[points[column].isin(values)]
    if points.empty:
        return Skipped(spec, f"no valid points to plot ({invalid} invalid) in {spec.scenario}")
    points = derive.add_derived(points)
    data = FigureData(spec, pd.DataFrame(columns=FRAME_COLUMNS))
    if invalid and spec.keep_invalid:
        data.notes.append(f"{invalid} invalid point record(s) drawn: {spec.keep_invalid}")
    elif invalid:
        data.notes.append(f"{invalid} invalid point record(s) left out (see invalid_reason)")
    series = _label_cycles(data, points, _series_columns(spec, mine))
    try:
        SOURCES[spec.source](data, mine, points, series)
    except _Skip as skip:
        return Skipped(spec, str(skip))
    return data
