"""A point's rows: the generator's result document (clients/SCHEMA.md) and the server's stats
as points columns, and the long-table rows of its record (docs/results-format.md)."""

from __future__ import annotations

from typing import Any

from clients import validity
from harness.results.format import (
    CODE_SEPARATOR,
    FACT_COLUMN_NAMES,
    REASON_SEPARATOR,
    WINDOW_SOURCES,
    edge_column,
    kernel_release_of,
)

SERVER_STATS_DELTAS = ("dispatch_calls", "dispatch_events", "signals_dequeued",
                       "sigio_overflows", "fallback_rescans", "requests", "replies",
                       "connections_accepted", "accept_calls", "emfile_events")
RTSIG_ONLY = ("signals_dequeued", "sigio_overflows", "fallback_rescans")


def point_ids(run_id: str, point_id: str, repetition: int) -> dict[str, Any]:
    """The columns every row of one point × repetition starts with, in every table."""
    return {"run_id": run_id, "point_id": point_id, "repetition": repetition}


def identified_row(ids: dict[str, Any], scenario: str,
                   parameters: dict[str, Any]) -> dict[str, Any]:
    """A points row's identification and parameter columns."""
    return {**ids, "scenario": scenario, "kernel_release": kernel_release_of(ids["run_id"]),
            **parameters}


def measured_row(ids: dict[str, Any], scenario: str, parameters: dict[str, Any],
                 doc: dict[str, Any], window: dict[str, Any],
                 server: dict[str, Any]) -> dict[str, Any]:
    """A points row before it is judged: the generator's metrics, the samplers' window
    columns and the server's stats deltas (server_deltas)."""
    return {**identified_row(ids, scenario, parameters), "duration_s": doc.get("duration_s"),
            **generator_metrics(doc), **window, **server}


def _ms(value: float | None) -> float | None:
    return value / 1000.0 if value is not None else None


def generator_metrics(doc: dict[str, Any]) -> dict[str, Any]:
    """Point columns from a generator result document (clients/SCHEMA.md)."""
    errors = doc.get("errors") or {}
    latency = doc.get("latency") or {}
    streaming = doc.get("stream") is not None  # bulk writes: no requests, no replies
    row: dict[str, Any] = {
        "reply_rate_rps": None if streaming else success_rate(doc),
        "replies_non_2xx": None if streaming else _non_2xx(doc),
        "request_rate_rps": None if streaming else doc.get("request_rate_rps"),
        "errors_total": sum(v for v in errors.values() if v is not None) if errors else None,
        "timeouts_total": (errors.get("connect_timeout") or 0)
        + (errors.get("response_timeout") or 0) if errors else None,
        "late_sends": doc.get("late_sends"),
        "generator_idle_poll_pct": validity.idle_poll_pct(
            (doc.get("generator_cpu") or {}).get("spin_idle_s"), doc.get("duration_s")),
        "stream_throughput_mbps": (doc.get("stream") or {}).get("achieved_mbps"),
    }
    for kind, prefix in (("corrected", "resp_time"), ("uncorrected", "resp_time_uncorrected")):
        hist = latency.get(kind) or {}
        for stat in ("mean", "p50", "p99"):
            row[f"{prefix}_{stat}_ms"] = _ms(hist.get(f"{stat}_us"))
    return row


def _by_status(doc: dict[str, Any]) -> dict[str, int]:
    return (doc.get("replies") or {}).get("by_status") or {}


def _non_2xx(doc: dict[str, Any]) -> int | None:
    statuses = _by_status(doc)
    return sum(n for code, n in statuses.items() if not code.startswith("2")) if statuses \
        else None


def success_rate(doc: dict[str, Any]) -> float | None:
    """2xx replies per second of the window: a server answering 400 or 503 is not serving.
    Generators count replies of every status; their status breakdown gives the 2xx share."""
    statuses, rate = _by_status(doc), doc.get("reply_rate_rps")
    total = sum(statuses.values())
    if rate is None or not total:
        return rate
    return rate * sum(n for code, n in statuses.items() if code.startswith("2")) / total


def server_deltas(before: dict[str, Any] | None, after: dict[str, Any] | None,
                  rtsig: bool) -> dict[str, Any]:
    """Server stats over the window; rtsig: the server dispatched by RT signals, the only
    dispatch whose signal counters mean anything."""
    row: dict[str, Any] = {}
    for key in SERVER_STATS_DELTAS:
        if before is None or after is None or (key in RTSIG_ONLY and not rtsig):
            row[key] = None
        else:
            row[key] = after.get(key, 0) - before.get(key, 0)
    calls, events = row["dispatch_calls"], row["dispatch_events"]
    row["events_per_dispatch"] = events / calls if calls else None
    row["server_connections_max"] = after.get("connections_max") if after else None
    row = {("server_" + k if k in ("requests", "replies") else k): v for k, v in row.items()}
    return row


def window_columns(start_ns: int, end_ns: int,
                   edges: dict[str, tuple[int, int]]) -> dict[str, Any]:
    """The runner's window and each source's edges (start_ns, end_ns on the window's clock)
    as points columns: every source's pair, null where it did not run."""
    row: dict[str, Any] = {"window_start_ns": start_ns, "window_end_ns": end_ns,
                           "window_s": (end_ns - start_ns) / 1e9}
    for source in WINDOW_SOURCES:
        used = edges.get(source)
        row[edge_column(source, "start")] = (used[0] - start_ns) / 1e6 if used else None
        row[edge_column(source, "end")] = (used[1] - end_ns) / 1e6 if used else None
    return row


def cold_held(cold_doc: dict[str, Any]) -> int | None:
    """Cold connections still held at the end, from the cold generator's document."""
    return (cold_doc.get("cold") or {}).get("held")


def histogram_rows(doc: dict[str, Any], ids: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for kind, hist in (doc.get("latency") or {}).items():
        for lo, hi, count in (hist or {}).get("buckets") or []:
            rows.append({**ids, "kind": kind, "lo_us": lo, "hi_us": hi, "count": count})
    return rows


def timeline_rows(doc: dict[str, Any], ids: dict[str, Any]) -> list[dict[str, Any]]:
    """The generator's per-second timeline as long timeseries rows (source generator)."""
    return [{**ids, "t_s": entry["t_s"], "source": "generator", "metric": key,
             "value": entry[key]}
            for entry in doc.get("timeline") or [] for key in entry if key != "t_s"]


def measured_record(ids: dict[str, Any], row: dict[str, Any], doc: dict[str, Any],
                    samples: list[dict[str, Any]],
                    profile_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A point record: its points row, and its rows of each long table."""
    return {
        "point": row,
        "timeseries": timeline_rows(doc, ids) + [{**ids, **sample} for sample in samples],
        "histograms": histogram_rows(doc, ids),
        "profiles": [{**ids, **prow} for prow in profile_rows],
    }


def verdict_columns(verdict: validity.Verdict) -> dict[str, Any]:
    """A points row's verdict (docs/results-format.md): valid, its reasons' sentences and
    codes (each joined into one string, null when valid), and whether they were all
    interference (measured again under interference_retries)."""
    return {"valid": verdict.valid,
            "invalid_reason": REASON_SEPARATOR.join(r.sentence for r in verdict.reasons) or None,
            "invalid_codes": CODE_SEPARATOR.join(r.code for r in verdict.reasons) or None,
            "interference_only": verdict.interference_only}


def failed_record(ids: dict[str, Any], scenario: str, parameters: dict[str, Any],
                  reason: validity.Reason) -> dict[str, Any]:
    """The record of a point that could not be measured: invalid, for this reason, with the
    columns every row holds (the facts' columns null: nothing was measured)."""
    row = {**identified_row(ids, scenario, parameters), **dict.fromkeys(FACT_COLUMN_NAMES),
           **verdict_columns(validity.Verdict((reason,)))}
    return {"point": row, "timeseries": [], "histograms": [], "profiles": []}
