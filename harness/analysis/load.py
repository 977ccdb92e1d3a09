"""Read wanbench run directories (results format, schema version 1) into tidy pandas frames."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

SCHEMA_VERSION = 1

ID_COLUMNS = ("run_id", "scenario", "point_id", "repetition", "kernel_release")
PARAMETER_COLUMNS = (
    "server",
    "dispatch",
    "accept",
    "reply_bytes",
    "hot_conns",
    "cold_conns",
    "offered_rate_rps",
    "one_way_delay_ms",
    "generator",
    "workers",
)
REQUIRED_POINT_COLUMNS = (*ID_COLUMNS, *PARAMETER_COLUMNS, "valid")
TABLE_COLUMNS = {
    "timeseries.parquet": ("run_id", "point_id", "repetition", "t_s", "source", "metric", "value"),
    "histograms.parquet": ("run_id", "point_id", "repetition", "kind", "lo_us", "hi_us", "count"),
    "profiles.parquet": ("run_id", "point_id", "repetition", "symbol", "layer", "samples", "pct"),
}
REQUIRED_MANIFEST_KEYS = ("schema_version", "run_id", "scenario_name", "kernel")


class ResultsFormatError(ValueError):
    """A run directory does not follow docs/results-format.md."""


@dataclass
class RunSet:
    """One or many runs as tidy frames; `manifests` has one row per run."""

    manifests: pd.DataFrame
    points: pd.DataFrame
    timeseries: pd.DataFrame
    histograms: pd.DataFrame
    profiles: pd.DataFrame
    raw_manifests: dict[str, dict]

    def scenario(self, name: str) -> RunSet:
        """The subset of runs whose manifest scenario_name is `name`."""
        run_ids = set(self.manifests.loc[self.manifests["scenario_name"] == name, "run_id"])

        def keep(frame: pd.DataFrame) -> pd.DataFrame:
            return frame[frame["run_id"].isin(run_ids)].reset_index(drop=True)

        return RunSet(
            manifests=keep(self.manifests),
            points=keep(self.points),
            timeseries=keep(self.timeseries),
            histograms=keep(self.histograms),
            profiles=keep(self.profiles),
            raw_manifests={k: v for k, v in self.raw_manifests.items() if k in run_ids},
        )


def _read_manifest(run_dir: Path) -> dict:
    path = run_dir / "manifest.json"
    if not path.is_file():
        raise ResultsFormatError(
            f"{path}: missing; a run directory holds manifest.json (is {run_dir} a run directory "
            "written by `wanbench run`?)"
        )
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ResultsFormatError(f"{path}: not valid JSON ({exc})") from exc
    missing = [key for key in REQUIRED_MANIFEST_KEYS if key not in manifest]
    if missing:
        raise ResultsFormatError(f"{path}: missing key(s) {', '.join(missing)}")
    if manifest["schema_version"] != SCHEMA_VERSION:
        raise ResultsFormatError(
            f"{path}: schema_version {manifest['schema_version']!r}, this wanbench reads "
            f"version {SCHEMA_VERSION}; re-run the scenario or use a matching wanbench"
        )
    return manifest


def _require_columns(frame: pd.DataFrame, columns: tuple[str, ...], where: Path) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ResultsFormatError(f"{where}: missing column(s) {', '.join(missing)}")


def _read_records(run_dir: Path) -> dict[str, pd.DataFrame]:
    """Tables rebuilt from points/*.json, for a run interrupted before its Parquet rebuild.

    A record is {"point": row, "timeseries": [...], "histograms": [...], "profiles": [...]}.
    """
    paths = sorted((run_dir / "points").glob("*.json"))
    if not paths:
        raise ResultsFormatError(
            f"{run_dir / 'points.parquet'}: missing, and no records in {run_dir / 'points'}; "
            "the run has no finished points"
        )
    records = [json.loads(p.read_text()) for p in paths]
    tables = {"points.parquet": pd.DataFrame([r["point"] for r in records])}
    for name in TABLE_COLUMNS:
        rows = [row for r in records for row in r.get(name.removesuffix(".parquet")) or []]
        tables[name] = pd.DataFrame(rows, columns=None if rows else list(TABLE_COLUMNS[name]))
    return tables


def _read_tables(run_dir: Path, manifest: dict) -> dict[str, pd.DataFrame]:
    """points.parquet and the long tables; absent long tables are empty (nothing sampled)."""
    if (run_dir / "points.parquet").is_file():
        tables = {"points.parquet": pd.read_parquet(run_dir / "points.parquet")}
        for name in TABLE_COLUMNS:
            path = run_dir / name
            tables[name] = (pd.read_parquet(path) if path.is_file()
                            else pd.DataFrame(columns=list(TABLE_COLUMNS[name])))
    else:
        tables = _read_records(run_dir)
    extra = tuple(manifest.get("parameters") or ())
    required = {"points.parquet": tuple(dict.fromkeys((*REQUIRED_POINT_COLUMNS, *extra))),
                **TABLE_COLUMNS}
    for name, frame in tables.items():
        _require_columns(frame, required[name], run_dir / name)
    return tables


def _manifest_row(manifest: dict, run_dir: Path) -> dict:
    kernel = manifest.get("kernel") or {}
    perf = manifest.get("perf") or {}
    cpu = manifest.get("cpu") or {}
    topology = manifest.get("topology") or {}
    return {
        "run_id": manifest["run_id"],
        "scenario_name": manifest["scenario_name"],
        "schema_version": manifest["schema_version"],
        "created_at": manifest.get("created_at"),
        "kernel_release": kernel.get("release"),
        "repetitions": manifest.get("repetitions"),
        "cpu_model": cpu.get("model"),
        "cpu_count": cpu.get("count"),
        "topology_backend": topology.get("backend"),
        "hardware_counters": perf.get("hardware_counters"),
        "git_revision": manifest.get("git_revision"),
        "path": str(run_dir),
    }


def find_runs(root: str | Path) -> list[Path]:
    """Run directories at or below `root` (directories holding manifest.json), sorted."""
    root = Path(root)
    if (root / "manifest.json").is_file():
        return [root]
    return sorted(p.parent for p in root.rglob("manifest.json"))


def load_runs(run_dirs: list[str | Path]) -> RunSet:
    """Load and validate run directories; each may also be a folder of run directories."""
    dirs = [d for given in run_dirs for d in (find_runs(given) or [Path(given)])]
    manifests, points, tables, raw = [], [], {name: [] for name in TABLE_COLUMNS}, {}
    for run_dir in dirs:
        if not run_dir.is_dir():
            raise ResultsFormatError(f"{run_dir}: no such run directory")
        manifest = _read_manifest(run_dir)
        if manifest["run_id"] in raw:
            raise ResultsFormatError(f"{run_dir}: run {manifest['run_id']} given twice")
        raw[manifest["run_id"]] = manifest
        manifests.append(_manifest_row(manifest, run_dir))
        run_tables = _read_tables(run_dir, manifest)
        points.append(run_tables["points.parquet"])
        for name in TABLE_COLUMNS:
            tables[name].append(run_tables[name])
    if not manifests:
        raise ResultsFormatError("no run directories given")

    def concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
        frames = [f for f in frames if not f.empty] or frames[:1]
        return pd.concat(frames, ignore_index=True)

    return RunSet(
        manifests=pd.DataFrame(manifests),
        points=concat(points),
        timeseries=concat(tables["timeseries.parquet"]),
        histograms=concat(tables["histograms.parquet"]),
        profiles=concat(tables["profiles.parquet"]),
        raw_manifests=raw,
    )
