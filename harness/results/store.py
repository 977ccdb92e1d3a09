"""The run directory: manifest, one atomic record per finished point, tidy Parquet tables."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from clients.atomic import write_atomic
from harness.results.format import (
    DAMAGED_MANIFEST,
    DAMAGED_RECORD,
    LONG_TABLE_COLUMNS,
    TABLES,
    ResultsFormatError,
    check_manifest,
    check_record,
    column_problem,
    table_file,
)


def write_json(path: Path, value: Any) -> None:
    write_atomic(path, (json.dumps(value, indent=2, default=str) + "\n").encode())


def _read_json(path: Path, fix: str) -> Any:
    try:
        return json.loads(path.read_bytes())
    except ValueError as exc:  # not JSON, or not text
        raise ResultsFormatError(f"{path}: not valid JSON ({exc}); {fix}") from None
    except OSError as exc:
        raise ResultsFormatError(f"{path}: cannot be read ({os.strerror(exc.errno or 0)}); "
                                 f"{fix}") from None


class RunDir:
    """results/<scenario>/<run-id>/ as described in docs/results-format.md."""

    def __init__(self, path: Path):
        self.path = path
        self.records_dir = path / "points"
        self.raw_root = path / "raw"

    @classmethod
    def create(cls, results_root: Path, scenario_name: str, run_id: str) -> RunDir:
        path = results_root / scenario_name / run_id
        path.mkdir(parents=True, exist_ok=False)
        return cls(path)

    @classmethod
    def open(cls, path: Path) -> RunDir:
        """An existing run, made consistent: a run killed between writing a record and
        rebuilding the tables left them missing or stale, and perhaps temporary files."""
        if not (path / "manifest.json").is_file():
            raise FileNotFoundError(f"{path} is not a wanbench run directory (no manifest.json)")
        run = cls(path)
        run.remove_temporaries()
        run.rebuild_tables()
        return run

    def remove_temporaries(self) -> None:
        """Atomic writes go through dot-files beside their target; one still there was cut
        short by a kill and holds nothing that was finished."""
        for directory in (self.path, self.records_dir):
            for stale in directory.glob(".*"):
                if stale.is_file():
                    stale.unlink(missing_ok=True)

    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.json"

    def read_manifest(self) -> dict[str, Any]:
        """The manifest, checked against the results format."""
        if not self.manifest_path.is_file():
            raise ResultsFormatError(
                f"{self.manifest_path}: missing; a run directory holds manifest.json (is "
                f"{self.path} a run directory written by `wanbench run`?)")
        return check_manifest(_read_json(self.manifest_path, DAMAGED_MANIFEST),
                              str(self.manifest_path))

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        write_json(self.manifest_path, manifest)

    @staticmethod
    def record_name(point_id: str, repetition: int) -> str:
        return f"{point_id}-r{repetition}"

    def raw_dir(self, point_id: str, repetition: int, fresh: bool = False) -> Path:
        """Raw logs of one point × repetition; fresh: emptied of an interrupted attempt's."""
        path = self.raw_root / self.record_name(point_id, repetition)
        if fresh and path.is_dir():
            shutil.rmtree(path)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _record_paths(self) -> list[Path]:
        return sorted(self.records_dir.glob("*.json"))

    @staticmethod
    def _record(path: Path) -> dict[str, Any]:
        return check_record(_read_json(path, DAMAGED_RECORD), str(path))

    def finished(self) -> set[str]:
        """Names of the point × repetition records on disk that stand: one cut short by a
        cluster worker's loss (its `lost_host`) was not measured, and is measured again."""
        return {path.stem for path in self._record_paths()
                if not self._record(path)["point"].get("lost_host")}

    def write_record(self, point_id: str, repetition: int, record: dict[str, Any]) -> None:
        """One finished point × repetition: its row plus its long-format table rows."""
        write_json(self.records_dir / f"{self.record_name(point_id, repetition)}.json", record)

    def write_attempt(self, point_id: str, repetition: int, attempt: int,
                      record: dict[str, Any]) -> None:
        """An attempt that was measured again (interference): kept, but not in the tables."""
        write_json(self.raw_dir(point_id, repetition) / f"attempt-{attempt}.json", record)

    def records(self) -> Iterable[dict[str, Any]]:
        """Every point record, checked: a damaged one is named, with the fix."""
        for path in self._record_paths():
            yield self._record(path)

    def table_path(self, name: str) -> Path:
        return self.path / table_file(name)

    def table_rows(self) -> dict[str, list[dict[str, Any]]]:
        """Every table's rows, from the point records: a table is the concatenation of the
        records' rows of its name (a record's points row is its "point")."""
        rows: dict[str, list[dict[str, Any]]] = {name: [] for name in TABLES}
        for record in self.records():
            rows["points"].append(record["point"])
            for name in LONG_TABLE_COLUMNS:
                rows[name].extend(record.get(name) or [])
        return rows

    def tables(self) -> dict[str, pd.DataFrame | None]:
        """Every table as built from the point records (None: no rows), each column holding
        the kind of value the format says."""
        frames: dict[str, pd.DataFrame | None] = {}
        for name, rows in self.table_rows().items():
            frames[name] = pd.DataFrame(rows) if rows else None
            problem = column_problem(frames[name]) if rows else None
            if problem:
                raise ResultsFormatError(f"{self.records_dir}: {problem} in the rows of the "
                                         f"{name} table; {DAMAGED_RECORD}")
        return frames

    def rebuild_tables(self) -> None:
        """Regenerate every Parquet table from the point records (atomically)."""
        for name, frame in self.tables().items():
            target = self.table_path(name)
            if frame is None:
                target.unlink(missing_ok=True)
                continue
            fd, tmp = tempfile.mkstemp(dir=self.path, prefix=f".{name}.", suffix=".parquet")
            os.close(fd)
            try:
                frame.to_parquet(tmp, index=False)
                os.replace(tmp, target)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
