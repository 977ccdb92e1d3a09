"""Run directories read and checked against the results format, as tidy pandas frames."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.results.compat import upgrade_points
from harness.results.format import (
    LONG_TABLE_COLUMNS,
    STORED_POINT_COLUMNS,
    TABLES,
    ResultsFormatError,
    column_problem,
    stored_version,
    topology_backend,
)
from harness.results.store import RunDir, foreign_run

T = TypeVar("T")


@dataclass(eq=False)
class RunSet:
    """One or many runs as tidy frames; `manifests` has one row per run.

    `fingerprints` names each run's content: a hash of the manifest and table bytes that were
    parsed (None for a run read from its point records), so that what is derived from a run
    can be cached under it and is never taken for another content's. The frames are not
    changed after reading, so subsets and what is derived from them are computed once.
    """

    manifests: pd.DataFrame
    points: pd.DataFrame
    timeseries: pd.DataFrame
    histograms: pd.DataFrame
    profiles: pd.DataFrame
    raw_manifests: dict[str, dict]
    fingerprints: dict[str, str | None] = field(default_factory=dict)
    _memo: dict[str, Any] = field(default_factory=dict, repr=False)

    def memo(self, key: str, compute: Callable[[RunSet], T]) -> T:
        """compute(self), computed once per RunSet (a scenario's subset, its derived points)."""
        if key not in self._memo:
            self._memo[key] = compute(self)
        return self._memo[key]

    def scenario(self, name: str) -> RunSet:
        """The subset of runs whose manifest scenario_name is `name` (one object per name)."""
        return self.memo(f"scenario:{name}", lambda runs: runs._subset(set(
            runs.manifests.loc[runs.manifests["scenario_name"] == name, "run_id"])))

    def newest(self) -> RunSet:
        """The run created last (by its manifest's created_at)."""
        return self._subset({self.manifests.sort_values("created_at").iloc[-1]["run_id"]})

    def _rows_of(self, name: str, frame: pd.DataFrame, run_ids: set[str]) -> pd.DataFrame:
        """The rows of `run_ids` in `frame` (one of this RunSet's, called `name`), in order:
        the frame is split by run once, so each subset costs its own rows only."""
        pieces: dict[str, pd.DataFrame] = self.memo(
            f"by run:{name}", lambda _: dict(tuple(frame.groupby("run_id", sort=False))))
        mine = [piece for run_id, piece in pieces.items() if run_id in run_ids]
        rows = pd.concat(mine) if len(mine) > 1 else mine[0] if mine else frame.iloc[0:0]
        return rows.reset_index(drop=True)

    def _subset(self, run_ids: set[str]) -> RunSet:
        return RunSet(
            manifests=self._rows_of("manifests", self.manifests, run_ids),
            points=self._rows_of("points", self.points, run_ids),
            timeseries=self._rows_of("timeseries", self.timeseries, run_ids),
            histograms=self._rows_of("histograms", self.histograms, run_ids),
            profiles=self._rows_of("profiles", self.profiles, run_ids),
            raw_manifests={k: v for k, v in self.raw_manifests.items() if k in run_ids},
            fingerprints={k: v for k, v in self.fingerprints.items() if k in run_ids},
        )


def _require_columns(frame: pd.DataFrame, columns: tuple[str, ...], where: Path) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ResultsFormatError(f"{where}: missing column(s) {', '.join(missing)}")


def _tables_from_records(run: RunDir) -> dict[str, pd.DataFrame]:
    """Tables rebuilt from the point records, for a run interrupted before its Parquet
    rebuild (read only: the run directory is left as it is)."""
    tables = run.tables()
    if tables["points"] is None:
        raise ResultsFormatError(
            f"{run.table_path('points')}: missing, and no records in {run.records_dir}; "
            "the run has no finished points"
        )
    return {name: pd.DataFrame(columns=list(LONG_TABLE_COLUMNS[name])) if frame is None
            else frame for name, frame in tables.items()}


def _read_table(run: RunDir, name: str, content: Any) -> pd.DataFrame:
    """One Parquet table, each column holding the kind of value the format says; its bytes
    (the ones parsed) go into `content`, the run's fingerprint."""
    path = run.table_path(name)
    try:
        data = path.read_bytes()
        content.update(data)
        # Read on this thread: a threaded read of Python-owned bytes can leave an Arrow
        # worker holding them, to drop them as the interpreter exits, and that aborts.
        with pq.ParquetFile(pa.BufferReader(data)) as parquet:
            table = parquet.read(use_threads=False)
        frame = table.to_pandas()
    except (pa.ArrowException, OSError) as exc:
        raise ResultsFormatError(
            f"{path}: not a Parquet file wanbench can read ({str(exc).splitlines()[0]}); "
            f"restore it, or rebuild the run's tables from its records: wanbench run "
            f"--resume {run.path}") from None
    problem = _not_finite(table) or column_problem(frame)
    if problem:
        raise ResultsFormatError(f"{path}: {problem}; restore it, or rebuild the run's tables "
                                 f"from its records: wanbench run --resume {run.path}")
    return frame


def _not_finite(table: pa.Table) -> str | None:
    """The first column holding NaN or an infinity, if any: the writer stores a number it
    did not measure as null, so a table's numbers are all finite."""
    for name in table.column_names:
        column = table[name]
        if pa.types.is_floating(column.type):
            bad = pc.or_(pc.is_nan(column), pc.is_inf(column))
            if pc.any(bad).as_py():
                return f"column {name} holds NaN or an infinity (a number is finite, or null)"
    return None


def _check_run_ids(tables: dict[str, pd.DataFrame], manifest: dict, run: RunDir) -> None:
    """Every row of the run's tables is of the run its manifest names."""
    foreign = foreign_run(dict(tables), manifest["run_id"])
    if foreign:
        raise ResultsFormatError(
            f"{run.table_path(foreign[0])}: rows of run {foreign[1]}, but the manifest is run "
            f"{manifest['run_id']}: tables and manifest of different runs; restore the run's "
            f"own, or rebuild its tables from its records: wanbench run --resume {run.path}")


def _read_tables(run: RunDir, manifest: dict) -> tuple[dict[str, pd.DataFrame], str | None]:
    """The points table and the long tables (absent long tables are empty: nothing sampled),
    and the run's fingerprint (None when read from its records)."""
    content = hashlib.sha256(json.dumps(manifest, sort_keys=True, default=str).encode())
    fingerprint: str | None = None
    if run.table_path("points").is_file():
        tables = {"points": _read_table(run, "points", content)}
        for name, columns in LONG_TABLE_COLUMNS.items():
            content.update(f"\0{name}\0".encode())  # which table the bytes that follow are
            tables[name] = (_read_table(run, name, content) if run.table_path(name).is_file()
                            else pd.DataFrame(columns=list(columns)))
        fingerprint = content.hexdigest()
    else:
        tables = _tables_from_records(run)
    extra = tuple(manifest.get("parameters") or ())
    stored = STORED_POINT_COLUMNS[stored_version(manifest)]
    required = {"points": tuple(dict.fromkeys((*stored, *extra))), **LONG_TABLE_COLUMNS}
    for name, frame in tables.items():
        _require_columns(frame, required[name], run.table_path(name))
    _check_run_ids(tables, manifest, run)
    tables["points"] = upgrade_points(_with_fixed_budget(tables["points"], manifest), manifest)
    return tables, fingerprint


def _with_fixed_budget(points: pd.DataFrame, manifest: dict) -> pd.DataFrame:
    """The server's CPU budget as columns even where the scenario fixed it rather than swept
    it (only sweep axes become parameter columns): what the server's CPU and idle time are
    judged against (harness.analysis.derive)."""
    cpus = (manifest.get("scenario") or {}).get("cpus") or {}
    fixed = {column: cpus.get(field) for column, field in
             (("server_budget_pct", "server_budget_pct"), ("budget_period_us", "budget_period_us"))
             if column not in points.columns}
    if not fixed.get("server_budget_pct"):
        return points
    return points.assign(**fixed)


def _manifest_row(manifest: dict, run_dir: Path) -> dict:
    kernel = manifest.get("kernel") or {}
    perf = manifest.get("perf") or {}
    cpu = manifest.get("cpu") or {}
    return {
        "run_id": manifest["run_id"],
        "scenario_name": manifest["scenario_name"],
        "schema_version": stored_version(manifest),
        "created_at": manifest.get("created_at"),
        "kernel_release": kernel.get("release"),
        "repetitions": manifest.get("repetitions"),
        "cpu_model": cpu.get("model"),
        "cpu_count": cpu.get("count"),
        "topology_backend": topology_backend(manifest),
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


def read_runs(run_dirs: list[str | Path],
              check_scenario: Callable[[dict[str, Any], str], object] | None = None) -> RunSet:
    """Read and check run directories; each may also be a folder of run directories. Each
    is checked once, here: its manifest and records (RunDir: size, nesting, finite numbers,
    the format), its tables (finite numbers, columns, rows of its own run), and, with
    check_scenario (harness.scenario.recorded, above this layer), the scenario it recorded.
    ResultsFormatError, one line, names the first problem."""
    dirs = [d for given in run_dirs for d in (find_runs(given) or [Path(given)])]
    manifests, tables, raw, fingerprints = [], {name: [] for name in TABLES}, {}, {}
    for run_dir in dirs:
        if not run_dir.is_dir():
            raise ResultsFormatError(f"{run_dir}: no such run directory")
        run = RunDir(run_dir)
        manifest = run.read_manifest()
        if check_scenario is not None:
            check_scenario(manifest, str(run.manifest_path))
        if manifest["run_id"] in raw:
            raise ResultsFormatError(f"{run_dir}: run {manifest['run_id']} given twice")
        raw[manifest["run_id"]] = manifest
        manifests.append(_manifest_row(manifest, run_dir))
        run_tables, fingerprints[manifest["run_id"]] = _read_tables(run, manifest)
        for name, frame in run_tables.items():
            tables[name].append(frame)
    if not manifests:
        raise ResultsFormatError("no run directories given")

    def concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
        frames = [f for f in frames if not f.empty] or frames[:1]
        return pd.concat(frames, ignore_index=True)

    return RunSet(
        manifests=pd.DataFrame(manifests),
        points=concat(tables["points"]),
        timeseries=concat(tables["timeseries"]),
        histograms=concat(tables["histograms"]),
        profiles=concat(tables["profiles"]),
        raw_manifests=raw,
        fingerprints=fingerprints,
    )
