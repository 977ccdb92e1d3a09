"""The reference run in numbers, for REPRODUCTION.md's prose: which revision ran, how long it
took, how many point records it made and how many were valid, and the steal its windows saw.
Generated from results/<dir>/reproduce.json and the runs it names, never typed."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from harness.results import verdict
from harness.results.runset import RunSet

RECORD = "reproduce.json"
STEAL = ("steal_server_cpu_pct", "steal_generator_cpu_pct")


def reference_summary(results_dir: Path, runs: RunSet) -> str | None:
    """One sentence on the `make reproduce` run in results_dir (None: it has no record)."""
    record_path = results_dir / RECORD
    if not record_path.is_file():
        return None
    record = json.loads(record_path.read_text())
    run_ids = {Path(s["run_dir"]).name for s in record["scenarios"]}
    points = runs.points[runs.points["run_id"].isin(run_ids)]
    valid = int(verdict.valid(points).sum())
    steal = pd.concat([pd.to_numeric(points[c], errors="coerce") for c in STEAL
                       if c in points]).dropna()
    steal_text = ("no steal was sampled" if steal.empty else
                  f"steal on the server's and the generator's CPUs median {steal.median():.1f} "
                  f"%, 95th percentile {steal.quantile(0.95):.1f} %, at most {steal.max():.1f} "
                  "% in one window")
    # a call with --only (`make beyond`) runs some scenarios and keeps the others' entries:
    # each revision's scenarios and their own seconds, not the last call's
    by_revision: dict[str, list[dict]] = {}
    for scenario in record["scenarios"]:
        revision = scenario.get("revision") or record["revision"]
        by_revision.setdefault(revision[:7], []).append(scenario)
    runs_text = "; ".join(
        f"from {revision}, {_scenarios(len(ran))} in "
        f"{sum(s.get('seconds') or 0 for s in ran) / 60:.1f} minutes"
        for revision, ran in by_revision.items()) if all(
        "seconds" in s for s in record["scenarios"]) else (
        f"from {record['revision'][:7]}, {_scenarios(len(record['scenarios']))} in "
        f"{record['seconds'] / 60:.1f} minutes")
    return (f"The committed runs: {runs_text} "
            f"({'finished' if record['finished'] else 'NOT finished'}); {len(points)} point "
            f"records, {valid} valid ({100 * valid / max(len(points), 1):.1f} %); "
            f"{steal_text}.")


def _scenarios(count: int) -> str:
    return f"{count} scenario{'' if count == 1 else 's'}"
