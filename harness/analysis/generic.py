"""Figures for any run: each headline metric against each numeric sweep axis of its scenario,
the other swept parameters as series; each point's latency spectrum and time series; a table
of every point; .hgrm files. Built as FigureSpecs, so they are prepared, drawn and reported
by the same code as the paper figures (figures.SPECS)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from harness.analysis import derive, latency
from harness.analysis.figures import FigureSpec, label
from harness.results.runset import RunSet

GENERIC = "generic"  # FigureSpec.paper of these figures: their section of the report
# What a reader of any load test looks at first, in panel order; a metric without a value in
# a scenario's points (cycles per packet of a request/reply run) gets no panel.
HEADLINE_METRICS = (
    "reply_rate_rps", "cpu_server_pct", "resp_time_p50_ms", "resp_time_p99_ms",
    "errors_total", "stream_throughput_mbps", "cycles_per_packet",
    # kernel_trace: the dispatch call's in-kernel time, the receive path's per packet
    "kernel_dispatch_ns_per_call", "kernel_rx_ns_per_packet",
)

# source.metric of the samples a time series shows: what was served, what the server's CPU
# did, and whether the generator kept its schedule
TIMESERIES_METRICS = ("generator.replies", "server_proc.cpu_pct", "generator.late")


def swept(runs: RunSet) -> list[str]:
    """The point parameters that vary among `runs`' points, in the manifests' sweep order
    (a composite axis such as `server` counts by the columns it sets)."""
    order: list[str] = []
    for manifest in runs.raw_manifests.values():
        for column in manifest.get("parameters", []):
            if column not in order:
                order.append(column)
    points = runs.points
    return [c for c in order if c in points.columns and points[c].nunique(dropna=True) > 1]


# Drawn only when some value is not zero: a panel of zeros says nothing a table does not.
ONLY_WHEN_NONZERO = ("errors_total",)


def _has_values(points: pd.DataFrame, metric: str) -> bool:
    return metric in points.columns and pd.to_numeric(points[metric], errors="coerce").notna().any()


def _worth_a_panel(points: pd.DataFrame, metric: str) -> bool:
    if metric in ONLY_WHEN_NONZERO:
        return _has_values(points, metric) and bool(points[metric].fillna(0).ne(0).any())
    return _has_values(points, metric)


def specs_for(scenario: str, runs: RunSet) -> list[FigureSpec]:
    """One figure per numeric sweep axis of `scenario` (none when only categories vary, e.g.
    dispatch: the report's table of points shows those), its points' latency spectra, and
    their time series."""
    mine = runs.scenario(scenario)
    axes = swept(mine)
    series = tuple(axes)
    over_time = []
    if not mine.histograms.empty and mine.histograms["kind"].isin(latency.KINDS).any():
        over_time.append(FigureSpec(
            id=f"{scenario}--latency", paper=GENERIC, target=scenario, scenario=scenario,
            title=f"{scenario}: response-time percentile spectrum", x="tail",
            y=tuple(latency.METRIC_OF_KIND.values()), series=series, kind="spectrum",
            source="latency"))
        over_time.append(FigureSpec(
            id=f"{scenario}--latency-cdf", paper=GENERIC, target=scenario, scenario=scenario,
            title=f"{scenario}: response-time distribution", x="response_time_ms",
            y=tuple(latency.CDF_OF_KIND.values()), series=series, kind="cdf",
            source="latency"))
    if not mine.timeseries.empty:
        over_time.append(FigureSpec(
            id=f"{scenario}--timeseries", paper=GENERIC, target=scenario, scenario=scenario,
            title=f"{scenario}: per second", x="t_s", y=TIMESERIES_METRICS, series=series,
            source="timeseries"))
    derived = derive.derived_points(mine)
    metrics = tuple(m for m in HEADLINE_METRICS if _worth_a_panel(derived, m))
    if not metrics:
        return over_time
    numeric = [a for a in axes if pd.api.types.is_numeric_dtype(mine.points[a])]
    return [
        FigureSpec(
            id=f"{scenario}--{x}",
            paper=GENERIC,
            target=scenario,
            scenario=scenario,
            title=f"{scenario}: vs {label(x).partition(' [')[0]}",
            x=x,
            y=metrics,
            series=tuple(a for a in axes if a != x),
        )
        for x in numeric
    ] + over_time


def generic_specs(runs: RunSet) -> tuple[FigureSpec, ...]:
    """The generic figures of every scenario among `runs`, in the order they were given."""
    scenarios = dict.fromkeys(runs.manifests["scenario_name"])
    return tuple(spec for name in scenarios for spec in specs_for(name, runs))


def point_table(scenario: str, runs: RunSet) -> pd.DataFrame:
    """One row per point of `scenario`: its swept parameters, each headline metric's median
    over the valid repetitions, and how many repetitions were valid."""
    mine = runs.scenario(scenario)
    points = derive.derived_points(mine)
    by = ["run_id", *swept(mine)] if mine.manifests["run_id"].nunique() > 1 else swept(mine)
    by = by or ["point_id"]
    metrics = [m for m in HEADLINE_METRICS if _has_values(points, m)]
    grouped = points.groupby(by, dropna=False, sort=True)
    table = grouped[metrics].agg(lambda s: s[points.loc[s.index, "valid"]].median())
    counts = grouped["valid"].agg(lambda v: f"{int(v.sum())}/{len(v)}").rename("valid")
    return table.join(counts).reset_index()


def _file_label(values: dict[str, object]) -> str:
    text = ",".join(f"{k}={v}" for k, v in values.items()) or "point"
    return re.sub(r"[^A-Za-z0-9_.,=+-]", "_", text)


def export_hgrm(runs: RunSet, out_dir: Path) -> list[Path]:
    """out_dir/<scenario>/<swept values>.<kind>.hgrm for every point: its valid repetitions'
    histograms merged (a point without any valid: its invalid ones, `invalid` in the name)."""
    written = []
    for scenario in dict.fromkeys(runs.manifests["scenario_name"]):
        mine = runs.scenario(scenario)
        axes = swept(mine)
        for _, reps in derive.with_verdict(mine.points).groupby("point_id", sort=False):
            valid, chosen = derive.shown_repetitions(reps)
            name = _file_label({a: reps[a].iloc[0] for a in axes})
            name += "" if valid else ".invalid"
            if len(mine.manifests) > 1:
                name = f"{reps['run_id'].iloc[0]}.{name}"
            rows = mine.histograms.merge(chosen[["run_id", "point_id", "repetition"]])
            for kind in latency.KINDS:
                of_kind = rows[rows["kind"] == kind]
                if of_kind["count"].sum() > 0:
                    path = out_dir / scenario / f"{name}.{kind}.hgrm"
                    written.append(latency.write_hgrm(latency.to_hdr(of_kind), path))
    return written
