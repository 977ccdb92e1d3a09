"""The generator result document (clients/SCHEMA.md): histograms, skeleton, validation."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

# The results format's version, defined here alone: the generator documents carry it and
# harness/results writes it into each run's manifest (docs/results-format.md). wb-sclient is
# built with it (clients/build.mk reads this line into -DSCHEMA_VERSION); clients/schema.json
# gets it from json_schema(). Bump it on any change of shape, with the step that upgrades the
# version before it (harness/results/compat.py: UPGRADES).
SCHEMA_VERSION = 2
SCHEMA_FILE = Path(__file__).with_name("schema.json")

# The same log-linear bucket layout as clients/sclient/hist.c (HdrHistogram-style):
# 64 ns wide buckets up to 16.4 us, then 128 sub-buckets per power of two.
UNIT_SHIFT = 6
SUB_BITS = 7
SUB = 1 << SUB_BITS
QUANTILES = (("p50_us", 0.5), ("p90_us", 0.9), ("p99_us", 0.99), ("p999_us", 0.999))
ERROR_KINDS = (
    "connect_timeout", "refused", "reset", "response_timeout", "no_local_port", "other")


def bucket_of(ns: int) -> int:
    m = ns >> UNIT_SHIFT
    if m < 2 * SUB:
        return m
    e = m.bit_length() - 1 - SUB_BITS
    return 2 * SUB + (e - 1) * SUB + ((m >> e) - SUB)


def bucket_bounds_ns(index: int) -> tuple[int, int]:
    if index < 2 * SUB:
        return index << UNIT_SHIFT, (index + 1) << UNIT_SHIFT
    e, sub = (index - 2 * SUB) // SUB + 1, (index - 2 * SUB) % SUB + SUB
    return (sub << e) << UNIT_SHIFT, ((sub + 1) << e) << UNIT_SHIFT


@dataclass
class Histogram:
    """Latency histogram in nanoseconds, written as the schema's H object (microseconds)."""

    counts: dict[int, int] = field(default_factory=dict)
    count: int = 0
    total_ns: int = 0
    min_ns: int | None = None
    max_ns: int | None = None

    def record(self, ns: int) -> None:
        ns = max(0, int(ns))
        i = bucket_of(ns)
        self.counts[i] = self.counts.get(i, 0) + 1
        self.count += 1
        self.total_ns += ns
        self.min_ns = ns if self.min_ns is None else min(self.min_ns, ns)
        self.max_ns = ns if self.max_ns is None else max(self.max_ns, ns)

    def to_dict(self) -> dict[str, Any]:
        buckets = []
        for i in sorted(self.counts):
            lo, hi = bucket_bounds_ns(i)
            buckets.append([round(lo / 1e3, 3), round(hi / 1e3, 3), self.counts[i]])
        doc = summarize_buckets(buckets)
        if self.count:
            doc.update(min_us=self.min_ns / 1e3, max_us=self.max_ns / 1e3,
                       mean_us=self.total_ns / self.count / 1e3)
            for name, _ in QUANTILES:
                doc[name] = min(max(doc[name], doc["min_us"]), doc["max_us"])
        return doc


def summarize_buckets(buckets: list[list[float]]) -> dict[str, Any]:
    """An H object from [lo_us, hi_us, count] rows; statistics from bucket midpoints."""
    count = sum(int(b[2]) for b in buckets)
    doc: dict[str, Any] = {"unit": "us", "buckets": buckets, "count": count}
    if not count:
        return doc | dict.fromkeys(("min_us", "max_us", "mean_us", *dict(QUANTILES)))
    mids = [((lo + hi) / 2, int(n)) for lo, hi, n in buckets]
    doc["min_us"] = min(b[0] for b in buckets if b[2])
    doc["max_us"] = max(b[1] for b in buckets if b[2])
    doc["mean_us"] = sum(m * n for m, n in mids) / count
    for name, q in QUANTILES:
        rank, seen = max(1, round(q * count)), 0
        for mid, n in mids:
            seen += n
            if seen >= rank:
                doc[name] = mid
                break
    return doc


def null_histogram(**known: float | None) -> dict[str, Any]:
    """An H object for a tool that reports only some statistics (no buckets)."""
    doc: dict[str, Any] = {"unit": "us", "buckets": None, "count": None}
    doc |= dict.fromkeys(("min_us", "max_us", "mean_us", *dict(QUANTILES)))
    doc.update({k: v for k, v in known.items() if k in doc})
    return doc


def merge_histograms(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Merge two H objects with buckets (same layout from every generator)."""
    rows: dict[tuple[float, float], int] = {}
    for lo, hi, n in (a.get("buckets") or []) + (b.get("buckets") or []):
        rows[(lo, hi)] = rows.get((lo, hi), 0) + int(n)
    merged = summarize_buckets([[lo, hi, n] for (lo, hi), n in sorted(rows.items())])
    mins = [h["min_us"] for h in (a, b) if h.get("min_us") is not None]
    maxs = [h["max_us"] for h in (a, b) if h.get("max_us") is not None]
    if mins:
        merged["min_us"], merged["max_us"] = min(mins), max(maxs)
    return merged


def _sum(values: list[Any]) -> Any:
    """The sum of the values a shard reported; None when none did."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _peak(values: list[Any]) -> Any:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _add_counts(parts: list[dict[str, Any] | None]) -> dict[str, Any]:
    keys = dict.fromkeys(k for part in parts if part for k in part)
    return {k: _sum([(part or {}).get(k) for part in parts]) for k in keys}


def _merged_histogram(hists: list[dict[str, Any]]) -> dict[str, Any]:
    if any(h.get("buckets") is None for h in hists):  # a tool without buckets: no exact merge
        return null_histogram()
    merged = hists[0]
    for other in hists[1:]:
        merged = merge_histograms(merged, other)
    return merged


def _merged_timeline(docs: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    seconds: dict[int, list[dict[str, Any]]] = {}
    for doc in docs:
        for row in doc.get("timeline") or []:
            seconds.setdefault(row["t_s"], []).append(row)
    if not seconds:
        return None
    return [{"t_s": t, **{k: v for k, v in _add_counts(rows).items() if k != "t_s"}}
            for t, rows in sorted(seconds.items())]


# the config fields a load split over shards divides between them
STREAM_SHAPE = ("write_bytes", "sender")  # a stream document's fields that are not counts
SHARED_LOAD = ("hot_conns", "cold_conns", "stream_conns", "rate_rps", "stream_mbps")


def merge_documents(shards: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One result document from the documents of generator shards that ran at once on
    several hosts (name -> document): counts, rates, errors and CPU times add, histograms
    merge exactly (bucket counts add), and the window is the shortest shard's (its edges
    left out: each host counted on its own clock, which only the caller can convert).
    `shards`
    counts the processes, each with a CPU of its own, as wb-sclient's own sharding does.
    Facts only, as a generator writes them: the verdict is clients.validity's, on each
    shard's facts (harness.cluster.coordinator.judged_merge)."""
    if not shards:
        raise ValueError("no shard documents to merge")
    docs = list(shards.values())
    first = docs[0]
    cold = [d.get("cold") or {} for d in docs]
    streams = [d["stream"] for d in docs if d.get("stream")]
    memory = [d.get("generator_memory") or {} for d in docs]
    established = _sum([c.get("established") for c in cold])
    cold_bytes = _sum([(m.get("bytes_per_cold_conn") or 0) * (c.get("established") or 0)
                       for m, c in zip(memory, cold, strict=True)])
    configs = [d.get("config") or {} for d in docs]
    return {
        **first,
        # what the shards ran between them: their loads add, the rest is the first's
        "config": {**configs[0], **{key: _sum([c.get(key) for c in configs])
                                    for key in SHARED_LOAD if key in configs[0]}},
        "valid": True,
        "invalid_reasons": [],
        "invalid_codes": [],
        "duration_s": min((d["duration_s"] for d in docs if d.get("duration_s") is not None),
                          default=None),
        **{key: _sum([d.get(key) for d in docs])
           for key in ("offered_rate_rps", "request_rate_rps", "reply_rate_rps", "late_sends",
                       "shards", "unfinished_shards")},
        "window": None,
        "first_send_unix_s": min((d["first_send_unix_s"] for d in docs
                                  if d.get("first_send_unix_s") is not None), default=None),
        "late_threshold_us": _peak([d.get("late_threshold_us") for d in docs]),
        "max_schedule_slip_us": _peak([d.get("max_schedule_slip_us") for d in docs]),
        "requests": _add_counts([d.get("requests") for d in docs]),
        "replies": {"total": _sum([(d.get("replies") or {}).get("total") for d in docs]),
                    "by_status": _add_counts([(d.get("replies") or {}).get("by_status")
                                              for d in docs])},
        "errors": _add_counts([d.get("errors") for d in docs]),
        "latency": {kind: _merged_histogram([d["latency"][kind] for d in docs])
                    for kind in first["latency"]},
        "timeline": _merged_timeline(docs),
        "cold": {**_add_counts(cold), "established_s": _peak([c.get("established_s")
                                                              for c in cold])},
        # every shard's streams write the same chunks, sent by the same side
        "stream": {**_add_counts([{k: v for k, v in s.items() if k not in STREAM_SHAPE}
                                  for s in streams]),
                   **{k: streams[0].get(k) for k in STREAM_SHAPE}} if streams else None,
        "generator_cpu": _add_counts([d.get("generator_cpu") for d in docs]),
        "generator_memory": {"rss_kb": _sum([m.get("rss_kb") for m in memory]),
                             "bytes_per_cold_conn": cold_bytes / established
                             if established and cold_bytes else None},
    }


def skeleton(generator: str, config: dict[str, Any]) -> dict[str, Any]:
    """A result document with every key present and nothing measured (null)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "generator": generator,
        "generator_version": None,
        "valid": True,
        "invalid_reasons": [],
        "config": config,
        "duration_s": None,
        "window": None,
        "warmup_s": config.get("warmup_s"),
        "offered_rate_rps": config.get("rate_rps"),
        "request_rate_rps": None,
        "reply_rate_rps": None,
        "requests": {"scheduled": None, "sent": None, "queued": None, "dropped": None},
        "replies": {"total": None, "by_status": {}},
        "errors": dict.fromkeys(ERROR_KINDS),
        "late_sends": None,
        "late_threshold_us": None,
        "max_schedule_slip_us": None,
        "latency": {"corrected": null_histogram(), "uncorrected": null_histogram(),
                    "tcp_srtt": null_histogram()},
        "timeline": None,
        "cold": {k: None for k in ("requested", "established", "held", "reconnected", "failed",
                                   "requests", "replies", "established_s")},
        "stream": None,
        "generator_cpu": {k: None for k in ("user_s", "sys_s", "pct", "run_delay_s")},
        "generator_memory": {"rss_kb": None, "bytes_per_cold_conn": None},
        "shards": 1,
    }


@cache
def json_schema() -> dict[str, Any]:
    """clients/schema.json, its schema_version the one this wanbench writes."""
    schema = json.loads(SCHEMA_FILE.read_text())
    schema["properties"]["schema_version"] = {"const": SCHEMA_VERSION}
    return schema


def validate(doc: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError when doc does not follow clients/schema.json."""
    import jsonschema  # deferred: only validation needs it

    jsonschema.validate(doc, json_schema())
