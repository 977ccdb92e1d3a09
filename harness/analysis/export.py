"""A run's numbers for other tools and for the terminal: its table of points (hyperfine's
`--export-markdown`), its per-second time series, each as Markdown, CSV or JSON chosen by the
file's suffix; and each point's response-time percentiles as `wrk --latency` prints them."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from harness.analysis import derive, latency
from harness.analysis.export_choices import PERCENTILE_COLUMNS, PERCENTILES, ExportError
from harness.analysis.numbers import metric, point_label, short_name
from harness.analysis.summary import PointSummary

LATENCY_KIND = "corrected"  # from each request's intended send time


def table(summaries: list[PointSummary], metrics: list[str]) -> pd.DataFrame:
    """One row per point, in sweep order: its parameters, the medians of `metrics` over its
    valid repetitions, valid/total, and whether its medians are of invalid repetitions."""
    return pd.DataFrame([{**s.parameters, **{m: s.medians.get(m) for m in metrics},
                          "valid": s.valid, "total": s.total,
                          "medians_of_invalid": s.medians_of_invalid} for s in summaries])


def timeseries(run_dir: Path) -> pd.DataFrame:
    """timeseries.parquet with each sample's point named (`point`: dispatch=select cold=0)
    and valid, from points.parquet: one row per sample."""
    points = pd.read_parquet(run_dir / "points.parquet")
    samples = pd.read_parquet(run_dir / "timeseries.parquet")
    axes = json.loads((run_dir / "manifest.json").read_text()).get("sweep_axes", [])
    named = points.assign(point=[point_label({a: row[a] for a in axes if a in row})
                                 for _, row in points.iterrows()])
    keys = ["run_id", "point_id", "repetition"]
    return samples.merge(named[[*keys, "point", "valid"]], on=keys, how="left")


def write(frame: pd.DataFrame, path: Path, notes: list[str] | None = None) -> Path:
    """frame as path's suffix says: Markdown with each value in its column's format
    (3.40 ms, 40,583), CSV and JSON with the stored numbers (units in the column names).
    notes: what the table must say beside its numbers (a scenario's own late-send limits):
    under a Markdown table, a `note` column of CSV and JSON rows."""
    if notes and path.suffix != ".md":
        frame = frame.assign(note="; ".join(notes))
    if path.suffix == ".md":
        text = _markdown(frame) + "".join(f"\n{note}\n" for note in notes or [])
    elif path.suffix == ".csv":
        text = frame.to_csv(index=False)
    else:
        text = frame.to_json(orient="records", indent=1) + "\n"
    try:
        path.write_text(text)
    except OSError as exc:
        raise ExportError(f"{path}: {exc.strerror}; check the path and permissions") from None
    return path


def _markdown(frame: pd.DataFrame) -> str:
    header = [short_name(c) for c in frame.columns]
    rows = [[metric(c, v) for c, v in row.items()] for _, row in frame.iterrows()]
    return "\n".join(["| " + " | ".join(header) + " |",
                      "|" + "|".join("---" for _ in header) + "|",
                      *("| " + " | ".join(cells) + " |" for cells in rows)]) + "\n"


def percentiles(run_dir: Path, summaries: list[PointSummary]) -> pd.DataFrame:
    """Per point (sweep order): its sweep values and response times at PERCENTILES (ms) over
    its valid repetitions' histograms merged (its invalid ones', marked, when it has none)."""
    points = pd.read_parquet(run_dir / "points.parquet")
    path = run_dir / "histograms.parquet"
    histograms = pd.read_parquet(path) if path.is_file() else pd.DataFrame()
    rows = []
    for summary in summaries:
        reps = derive.with_verdict(points[points["point_id"] == summary.point_id])
        valid, shown = derive.shown_repetitions(reps)
        counts = (histograms.merge(shown[["run_id", "point_id", "repetition"]])
                  if not histograms.empty else histograms)
        counts = counts[counts["kind"] == LATENCY_KIND] if not counts.empty else counts
        hdr = latency.to_hdr(counts) if not counts.empty else None
        values = ({c: hdr.get_value_at_percentile(p) / latency.NS_PER_MS
                   for c, p in zip(PERCENTILE_COLUMNS, PERCENTILES, strict=True)}
                  if hdr is not None and hdr.get_total_count() else
                  dict.fromkeys(PERCENTILE_COLUMNS))
        rows.append({**summary.parameters, **values, "valid": valid})
    return pd.DataFrame(rows)
