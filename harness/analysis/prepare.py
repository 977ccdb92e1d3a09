"""Turn loaded runs into the tidy rows one figure spec plots, or a one-line reason to skip it."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field

import pandas as pd

from clients.validity import Code
from harness.analysis import derive, latency, paper_values
from harness.analysis.figures import FigureSpec
from harness.metrics import ktrace
from harness.results.format import CODE_SEPARATOR
from harness.results.runset import RunSet

CYCLE_METRICS = ("cycles_per_packet",)
COUNTER_METRICS = ("instructions_per_packet",)
# valid: whether the row summarises repetitions the runner judged valid (False: drawn hollow).
# Valid and invalid repetitions of one point are summarised apart, so a point may have both.
FRAME_COLUMNS = ["facet", "series", "metric", "x", "valid", "median", "low", "high"]
SAMPLE = ["run_id", "point_id", "repetition"]  # one repetition of one point
# Kinds whose x axis is a number, so the paper's values can sit on it, and a paper's table
# drawn as bars beside ours; the others (a spectrum, a CDF) get them as a table in the report.
PAPER_ON_AXES_KINDS = ("line", "regression", "bars")
PAPER_ON_AXES_NOTE = ("paper values on our axes where the units agree (hardware of 1998-2004): "
                      "a change the paper gives (−44 %) starts from our curve's first point, as "
                      "the check compares; a rate it names is a vertical line; counts over runs "
                      "of another length on a right axis")
PAPER_IN_TABLE_NOTE = "paper values: in the report's table beside ours (not on this figure's axes)"
NO_REASON = "no reason recorded"


def _no_paper_values() -> pd.DataFrame:
    return pd.DataFrame(columns=paper_values.COLUMNS)


def _nothing_on_axes() -> pd.DataFrame:
    return pd.DataFrame(columns=[*paper_values.COLUMNS, "y"])


@dataclass
class FigureData:
    """Rows to draw (FRAME_COLUMNS), an optional table, and what the reader must be told.

    `bars` says what the min-max bars span (None: no bars); `paper` holds the paper's values
    for this figure (paper_values.COLUMNS), `paper_on_axes` those drawn on its axes, with `y`
    where (_paper_on_axes).
    """

    spec: FigureSpec
    frame: pd.DataFrame
    table: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)  # metric -> why
    ylabel_suffix: dict[str, str] = field(default_factory=dict)
    bars: str | None = None
    paper: pd.DataFrame = field(default_factory=_no_paper_values)
    paper_on_axes: pd.DataFrame = field(default_factory=_nothing_on_axes)


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
        # Several runs of one scenario (e.g. two kernels) become separate series, named as
        # `--label` named them, else by kernel where the kernels differ, else by run id.
        by_kernel = runs.manifests["kernel_release"].nunique() == len(runs.manifests)
        columns.append(RUN_LABEL if RUN_LABEL in runs.points
                       else "kernel_release" if by_kernel else "run_id")
    return columns


RUN_LABEL = "run_label"  # a points column only `labelled` adds
LABEL_SEPARATORS = (",", "=")  # a series label's own: a run's label may hold neither


def labelled(runs: RunSet, labels: dict[str, str]) -> RunSet:
    """runs whose series are named by `labels` (run id -> name, `wanbench plot --label`)
    rather than by run id or kernel. The runs' fingerprints take the labels in: a figure
    cached under other labels is not taken for these."""
    bad = [name for name in labels.values()
           if not name or any(sep in name for sep in LABEL_SEPARATORS)]
    if bad:
        raise ValueError(f"--label {bad[0]!r}: a label is a non-empty name without "
                         f"{' or '.join(map(repr, LABEL_SEPARATORS))}")
    fingerprints = {run: hashlib.sha256(f"{fp}\0label\0{labels[run]}".encode()).hexdigest()
                    if fp is not None else None for run, fp in runs.fingerprints.items()}
    return dataclasses.replace(
        runs, points=runs.points.assign(**{RUN_LABEL: runs.points["run_id"].map(labels)}),
        fingerprints=fingerprints, _memo={})


def _require(points: pd.DataFrame, columns: list[str], scenario: str) -> None:
    missing = [c for c in columns if c not in points.columns]
    if missing:
        raise _Skip(f"column(s) {', '.join(missing)} absent from the {scenario} run(s)")


def _repetitions(counts: pd.Series) -> str:
    """'3 repetitions', or '2–3 repetitions' when points were repeated unequally."""
    low, high = int(counts.min()), int(counts.max())
    span = str(high) if low == high else f"{low}–{high}"
    return f"{span} repetition{'' if span == '1' else 's'}"


def _repetitions_per_point(rows: pd.DataFrame) -> pd.Series:
    """How many repetitions of each point (valid and invalid apart) `rows` hold."""
    return rows.drop_duplicates(SAMPLE).groupby(["run_id", "point_id", "valid"]).size()


def _summary_rows(
    data: FigureData, points: pd.DataFrame, metrics: list[str], series: list[str]
) -> pd.DataFrame:
    spec = data.spec
    group = [*spec.facets, *series, spec.x, "valid"]
    frames = []
    for metric in metrics:
        summary = derive.summarize(points, group, metric)
        summary["metric"] = metric
        frames.append(summary)
    rows = pd.concat(frames, ignore_index=True)
    data.bars = f"bars: min–max over {_repetitions(rows['n'])}"
    data.notes.append(f"{data.bars}; markers: their median")
    rows["facet"] = _labels(rows, list(spec.facets))
    rows["series"] = _labels(rows, series)
    data.notes += _not_drawn(points, group, metrics, series, spec)
    return rows.rename(columns={spec.x: "x"})[FRAME_COLUMNS]


def _not_drawn(points: pd.DataFrame, group: list[str], metrics: list[str], series: list[str],
               spec: FigureSpec) -> list[str]:
    """Points with records but no value of a metric cannot be drawn: say which, rather than
    leave a gap in the curve unexplained."""
    notes = []
    for metric in metrics:
        counts = points.groupby(group, dropna=False)[metric].agg(["count", "size"]).reset_index()
        empty = counts[counts["count"] == 0]
        if empty.empty:
            continue
        empty = empty.assign(facet=_labels(empty, list(spec.facets)),
                             series=_labels(empty, series))
        where = empty["facet"].map(lambda facet: "" if facet == "all" else f" ({facet})")
        notes += [f"not drawn: {metric} of {row['series']}{where[i]} at "
                  f"{spec.x}={_fmt(row[spec.x])}: its {row['size']} "
                  f"{'valid' if row['valid'] else 'invalid'} record(s) hold no value"
                  for i, row in empty.iterrows()]
    return notes


def _not_traced(runs: RunSet) -> str:
    """Why a run has no in-kernel values: it did not trace, BPF could not run where it was
    made (the manifest's kernel_trace says why), or its points' traces came back empty."""
    recorded = ktrace.recorded(runs.raw_manifests.values())
    if not recorded:
        return ("not measured: the run did not trace the kernel (kernel_trace: false in its "
                "scenario)")
    lacking = sorted({s.detail for s in recorded if not s.tracepoints})
    if lacking:
        return f"not measured: eBPF could not run where the run was made ({'; '.join(lacking)})"
    return "not measured: no traced values in the run(s) (each point's log says why)"


def _unavailable_reason(runs: RunSet, metric: str) -> str:
    if metric in COUNTER_METRICS:
        reasons = {
            (m.get("perf") or {}).get("reason") or "no hardware counters"
            for m in runs.raw_manifests.values()
        }
        return "unavailable: " + "; ".join(sorted(reasons))
    if derive.is_kernel_metric(metric):
        return _not_traced(runs)
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


def _measured(data: FigureData, runs: RunSet, points: pd.DataFrame,
              metrics: list[str]) -> list[str]:
    """The metrics with values in points; each of the others gets its reason in
    data.unavailable."""
    present = []
    for metric in metrics:
        values = points[metric] if metric in points.columns else pd.Series(dtype=float)
        if pd.to_numeric(values, errors="coerce").notna().any():
            present.append(metric)
        else:
            data.unavailable[metric] = _unavailable_reason(runs, metric)
    return present


def _nothing_measured(data: FigureData) -> None:
    """No metric of the figure has a value: a figure of in-kernel values is drawn all the
    same, each panel saying why it is empty (the run did not trace, or BPF could not run);
    any other is skipped."""
    spec = data.spec
    if not any(derive.is_kernel_metric(metric) for metric in data.unavailable):
        raise _Skip(f"no values for {', '.join(spec.y)} in the {spec.scenario} run(s)")
    data.notes += sorted(set(data.unavailable.values()))


def _from_points(data: FigureData, runs: RunSet, points: pd.DataFrame, series: list[str]) -> None:
    spec = data.spec
    _require(points, [spec.x, *spec.facets, *series], spec.scenario)
    present = _measured(data, runs, points, list(spec.y))
    if present:
        data.frame = _summary_rows(data, points, present, series)
        # a table's in-kernel rows beside measured ones: why they are not, in the report too
        data.notes += sorted({why for metric, why in data.unavailable.items()
                              if derive.is_kernel_metric(metric)})
    else:
        _nothing_measured(data)


def _kernel_layers(data: FigureData, runs: RunSet, points: pd.DataFrame,
                   series: list[str]) -> None:
    """The stack's in-kernel time per packet by layer (derive.kernel_layers: system calls,
    receive and transmit softirq, and the whole stack), one curve per layer; the spec's other
    metrics (instructions per packet) one curve each, as _from_points draws them."""
    spec = data.spec
    layered = derive.kernel_layers(points)
    _require(layered, [spec.x, *spec.facets, *series], spec.scenario)
    by_layer = [m for m in spec.y if m in (derive.KERNEL_LAYER_NS, derive.KERNEL_LAYER_SHARE)]
    of_points = [m for m in spec.y if m not in by_layer]
    frames = []
    if present := _measured(data, runs, layered, by_layer):
        frames.append(_summary_rows(data, layered, present, series))
    if present := _measured(data, runs, points, of_points):
        frames.append(_summary_rows(data, points, present, [c for c in series if c != "layer"]))
    if frames:
        data.frame = pd.concat(frames, ignore_index=True)
        data.notes = list(dict.fromkeys(data.notes))  # each summary says what its bars span
        data.notes.append("layers at tracepoint grain: system calls (the server's read and "
                          "write, TCP's copy included) per packet in and out of the server; "
                          "receive softirq (IP, TCP) per packet received; transmit softirq per "
                          "packet sent, every CPU's; the whole stack their sum")
    else:
        _nothing_measured(data)


def _saturation(data: FigureData, runs: RunSet, points: pd.DataFrame, series: list[str]) -> None:
    spec = data.spec
    by = [*spec.facets, *series, spec.x]
    _require(points, [*by, "offered_rate_rps", "reply_rate_rps"], spec.scenario)
    # Invalid repetitions get a knee of their own (hollow): never mixed into a measured one.
    table = derive.saturation(points, [*by, "valid"])
    table["valid"] = table["valid"].astype(bool)
    if not table.loc[table["valid"], "saturated"].all():
        data.notes.append(
            "some curves never fell behind the offered rate: their saturation is a lower bound"
        )
    data.notes.append(
        "saturation throughput: the highest median reply rate over the offered rates (medians "
        f"over {_repetitions(_repetitions_per_point(points))}); no bars"
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
    table = derive.regressions(points[points["valid"]], spec.x, list(spec.y),
                               [*spec.facets, *series])
    if table.empty:
        raise _Skip("fewer than 3 valid points below saturation per curve: no regression")
    # the points the lines are fitted to (derive.regressions): kept up, and CPU to spare
    below = points[(points["reply_ratio"] >= derive.KEEP_UP_FRACTION)
                   & ~points["server_busy"].fillna(False).astype(bool)]
    below = below.sort_values([*spec.facets, *series, spec.x])
    rows = below.melt(id_vars=[spec.x, *spec.facets, *series, "valid"], value_vars=list(spec.y),
                      var_name="metric", value_name="median")
    rows = rows.assign(low=float("nan"), high=float("nan"))
    rows["facet"] = _labels(rows, list(spec.facets))
    rows["series"] = _labels(rows, series)
    data.frame = rows.rename(columns={spec.x: "x"})[FRAME_COLUMNS]
    table["facet"] = _labels(table, list(spec.facets))
    table["series"] = _labels(table, series)
    data.table = table[["facet", "series", "metric", "slope", "intercept", "r", "x_intercept", "n"]]
    data.notes.append(
        "dots: one repetition each, where the server kept up with the offered rate and had CPU "
        "to spare (the points its check fits); the lines use the valid ones (hollow dots are "
        "left out); the idle x-intercept (idle = 0) is a capacity estimate"
    )


def _by_point(points: pd.DataFrame, series: list[str]) -> list[tuple[str, bool, pd.DataFrame]]:
    """(series label, valid, its repetitions) per point: the valid repetitions, or, for a
    point without any, its invalid ones (drawn hollow)."""
    labelled = points.assign(series=_labels(points, series))
    return [(label, *derive.shown_repetitions(reps))
            for label, reps in labelled.groupby("series", sort=False)]


def _latency(data: FigureData, runs: RunSet, points: pd.DataFrame, series: list[str]) -> None:
    _require(points, series, data.spec.scenario)
    shown = _by_point(points, series)
    # Every point's histogram rows in one merge, then split: a merge per point cost more
    # than the percentiles.
    samples = pd.concat([reps[SAMPLE].assign(shown=i) for i, (_, _, reps) in enumerate(shown)])
    rows = dict(tuple(runs.histograms.merge(samples, on=SAMPLE).groupby(["shown", "kind"])))
    nothing = runs.histograms.iloc[0:0]
    frames = []
    for i, (label, valid, _reps) in enumerate(shown):
        for kind in latency.KINDS:
            hdr = latency.to_hdr(rows.get((i, kind), nothing))
            if data.spec.kind == "cdf":
                curve = latency.cdf(hdr)
                metric, x, y = latency.CDF_OF_KIND[kind], curve["value_ms"], curve["fraction"]
            else:
                curve = latency.spectrum(hdr)
                metric, x, y = latency.METRIC_OF_KIND[kind], curve["tail"], curve["value_ms"]
            frames.append(pd.DataFrame({
                "facet": "all", "series": label, "metric": metric, "x": x, "valid": valid,
                "median": y, "low": float("nan"), "high": float("nan")}))
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if frame.empty or frame["median"].isna().all():
        raise _Skip(f"no response-time histograms in the {data.spec.scenario} run(s)")
    data.frame = frame[FRAME_COLUMNS]
    data.notes.append("each point's repetitions merged; corrected: from each request's intended "
                      "send time (coordinated omission corrected), uncorrected: from its actual "
                      f"send; {_repetitions(_repetitions_per_point(points))}")


def _timeseries(data: FigureData, runs: RunSet, points: pd.DataFrame,
                series: list[str]) -> None:
    _require(points, series, data.spec.scenario)
    first = points[points["repetition"] == points["repetition"].min()]
    # runs of one kernel are series by run_id, which SAMPLE names too: each column once
    columns = list(dict.fromkeys([*SAMPLE, *series, "valid", "duration_s"]))
    samples = runs.timeseries.merge(first[columns], on=SAMPLE)
    samples = samples.assign(metric=samples["source"] + "." + samples["metric"])
    samples = samples[samples["metric"].isin(data.spec.y)]
    if samples.empty:
        raise _Skip(f"no per-second samples in the {data.spec.scenario} run(s)")
    samples = samples.assign(x=_since_generator_start(samples, runs))
    # the generator's last second is cut short by the end of the window: not a rate
    end = samples["run_id"].map(_warmups(runs)) + samples["duration_s"]
    samples = samples[(samples["source"] != "generator") | (samples["x"] + 1 <= end + 1e-6)]
    rows = samples.assign(facet="all", series=_labels(samples, series),
                          median=samples["value"], low=float("nan"), high=float("nan"))
    data.frame = rows[FRAME_COLUMNS]
    data.unavailable.update({m: "unavailable: not sampled in the run(s)" for m in data.spec.y
                             if m not in set(samples["metric"])})
    data.notes.append("first repetition of each point; each sample at the start of its second, "
                      "counted from the generator's start (warm-up included)")


def _warmups(runs: RunSet) -> dict[str, float]:
    return {run: (m.get("scenario") or {}).get("warmup_s") or 0.0
            for run, m in runs.raw_manifests.items()}


def _since_generator_start(samples: pd.DataFrame, runs: RunSet) -> pd.Series:
    """Each sample's second on the generator's clock. The generator's timeline counts seconds
    from its start (entry t covers [t, t+1)); the samplers' from the end of the warm-up, each
    sample stamped at the end of the interval it covers."""
    warmup = samples["run_id"].map(_warmups(runs))
    sampler = samples["source"] != "generator"
    previous = samples.groupby([*SAMPLE, "source", "metric"])["t_s"].shift(fill_value=0.0)
    return samples["t_s"].where(~sampler, warmup + previous)


SOURCES = {
    "points": _from_points,
    "latency": _latency,
    "timeseries": _timeseries,
    "saturation": _saturation,
    "regression": _regression,
    "kernel_layers": _kernel_layers,
}


def rules_named(codes: object) -> str:
    """The rules a record's codes (invalid_codes) name, so that repetitions group by rule:
    'late_sends,steal' -> 'late sends; CPU steal'."""
    if not isinstance(codes, str) or not codes:
        return NO_REASON
    return "; ".join(dict.fromkeys(Code(code).rule for code in codes.split(CODE_SEPARATOR)))


def _validity_notes(spec: FigureSpec, points: pd.DataFrame) -> list[str]:
    """How many repetitions were invalid and why, one note per combination of rules."""
    invalid = points[~points["valid"]]
    if invalid.empty:
        return []
    if spec.keep_invalid:
        return [f"{len(invalid)} invalid point record(s), hollow like every invalid one, still "
                f"measure what is plotted: {spec.keep_invalid}"]
    counts = invalid["invalid_codes"].map(rules_named).value_counts()
    return [f"{n} point repetition(s) invalid: {why} (hollow)" for why, n in counts.items()]


def _matches(ours: str, paper: str) -> bool:
    """Our series label is the paper's or narrower ("dispatch=select, hot_conns=50" is one of
    the paper's "dispatch=select")."""
    return paper == "all" or set(paper.split(", ")) <= set(ours.split(", "))


def _first_points(frame: pd.DataFrame) -> pd.DataFrame:
    """facet, series, metric and `first`: each valid curve's median at its lowest x."""
    valid = frame[frame["valid"]].dropna(subset=["median"]).sort_values("x")
    return (valid.groupby(["facet", "series", "metric"], sort=False)["median"].first()
            .rename("first").reset_index())


def _from_first_point(rows: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    """ratio_to_first rows, one copy per curve of ours they describe, at y = that curve's
    first point × the ratio: the comparison the check makes, drawn in our units."""
    copies = []
    for curve in _first_points(frame).itertuples(index=False):
        ours = [_matches(curve.series, series) for series in rows["series"]]
        mine = rows[(rows["metric"] == curve.metric) & rows["facet"].isin((curve.facet, "all"))
                    & pd.Series(ours, index=rows.index, dtype=bool)]
        copies.append(mine.assign(facet=curve.facet, y=mine["value"] * curve.first))
    return pd.concat(copies, ignore_index=True) if copies else rows.iloc[0:0].assign(y=0.0)


def _paper_on_axes(data: FigureData, paper: pd.DataFrame) -> pd.DataFrame:
    """The paper's values a panel of this figure can show (a numeric x; a plotted metric, or
    the x column itself for a position on the x axis; a facet drawn here, "all": every
    panel), with `y`, where each is drawn (see paper_values' scale). None where nothing of
    ours was measured: no panel to sit on."""
    if (data.spec.kind not in PAPER_ON_AXES_KINDS or data.frame.empty
            or not pd.api.types.is_numeric_dtype(paper["x"])):
        return paper.iloc[0:0].assign(y=0.0)
    # a table's rows are the paper's whether or not ours were measured (its bars say which)
    measured = set(data.spec.y) if data.spec.kind == "bars" else (
        set(data.frame["metric"]) - set(data.unavailable))
    metrics = measured | {data.spec.x}
    facets = {*data.frame["facet"], "all"}
    shown = paper[paper["metric"].isin(metrics) & paper["facet"].isin(facets)
                  & (paper["scale"] != "slope")]
    ratios = shown["scale"] == "ratio_to_first"
    as_given = shown[~ratios].assign(y=lambda rows: rows["value"])
    return pd.concat([as_given, _from_first_point(shown[ratios], data.frame)], ignore_index=True)


def _add_paper_values(data: FigureData) -> None:
    try:
        paper = paper_values.for_figure(data.spec.id)
    except paper_values.PaperValuesError as error:
        # A malformed file costs its values, not the figure.
        data.notes.append(f"paper values unreadable: {error}")
        return
    if paper.empty:
        if data.spec.words_only:
            data.notes.append(f"no paper values drawn: the text gives words only, "
                              f"{data.spec.words_only}")
        return
    data.paper = paper
    data.paper_on_axes = _paper_on_axes(data, paper)
    data.notes.append(PAPER_IN_TABLE_NOTE if data.paper_on_axes.empty else PAPER_ON_AXES_NOTE)


def prepare(spec: FigureSpec, runs: RunSet) -> FigureData | Skipped:
    """Rows for `spec` from the runs whose scenario_name is spec.scenario.

    Invalid repetitions are kept and marked (valid False, drawn hollow), also where the spec
    says why they still measure what it plots (keep_invalid).
    """
    mine = runs.scenario(spec.scenario)
    if mine.manifests.empty:
        return Skipped(spec, f"no run of scenario {spec.scenario} among the given runs")
    points = derive.derived_points(mine)
    for column, values in spec.only:
        if column in points.columns:
            points = points[points[column].isin(values)]
    if points.empty:
        return Skipped(spec, f"no points to plot in {spec.scenario}")
    data = FigureData(spec, pd.DataFrame(columns=FRAME_COLUMNS))
    data.notes += _validity_notes(spec, points)
    data.notes += [f"not in this figure: {paper_values.ABSENT_FROM_LINUX[key]}"
                   for key in spec.absent]
    series = _label_cycles(data, points, _series_columns(spec, mine))
    try:
        SOURCES[spec.source](data, mine, points, series)
    except _Skip as skip:
        return Skipped(spec, str(skip))
    _add_paper_values(data)
    return data
