"""The run directory: manifest, one atomic record per finished point, tidy Parquet tables;
one writer at a time."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from clients.atomic import is_temporary, replacing, write_atomic
from harness.results.format import (
    DAMAGED_MANIFEST,
    DAMAGED_RECORD,
    LONG_TABLE_COLUMNS,
    SCHEMA_VERSION,
    TABLES,
    ResultsFormatError,
    check_manifest,
    check_record,
    column_problem,
    new_run_id,
    stored_version,
    table_file,
)

# The writer's lock: held (flock) by the one process writing the run, which keeps its PID
# in it; the kernel releases it when that process ends, however it ends.
LOCK_FILE = "writer.lock"
# What to do about a write that failed for want of storage; the run's finished points stay.
STORAGE_FIXES = {
    errno.ENOSPC: "free space on its file system",
    errno.EDQUOT: "free space within your disk quota",
    errno.EROFS: "remount its file system read-write",
}


# Bounds of a manifest or record read back: the largest run written holds 60 KB and nests 9
# levels (the scenario in it at most yamlfile.MAX_DEPTH more); far past both, a file is damaged
# or made to exhaust the reader (Python's JSON parser recurses per level).
MAX_JSON_BYTES = 64 << 20
MAX_JSON_DEPTH = 64


class RunDirError(Exception):
    """A run directory cannot be written as asked; the message names the fix."""


def write_json(path: Path, value: Any) -> None:
    write_atomic(path, (json.dumps(value, indent=2, default=str) + "\n").encode())


def _read_json(path: Path, fix: str) -> Any:
    """A manifest or record, within the bounds any of them keeps: at most MAX_JSON_BYTES,
    nested at most MAX_JSON_DEPTH deep, finite numbers only (the writer's values)."""
    try:
        size = path.stat().st_size
        if size > MAX_JSON_BYTES:
            raise ResultsFormatError(f"{path}: {size:,} bytes, more than any run writes "
                                     f"({MAX_JSON_BYTES:,}); {fix}")
        value = json.loads(path.read_bytes(), parse_constant=_not_finite)
    except (ValueError, RecursionError) as exc:  # not JSON, not text, or nested past Python
        if isinstance(exc, ResultsFormatError):
            raise
        reason = (f"nested deeper than {MAX_JSON_DEPTH} levels"
                  if isinstance(exc, RecursionError) else f"not valid JSON ({exc})")
        raise ResultsFormatError(f"{path}: {reason}; {fix}") from None
    except OSError as exc:
        raise ResultsFormatError(f"{path}: cannot be read ({os.strerror(exc.errno or 0)}); "
                                 f"{fix}") from None
    if _depth(value) > MAX_JSON_DEPTH:
        raise ResultsFormatError(f"{path}: nested deeper than {MAX_JSON_DEPTH} levels; {fix}")
    return value


def _not_finite(constant: str) -> Any:
    raise ValueError(f"{constant} is not a finite number")


def _depth(value: Any) -> int:
    """How deeply value's lists and objects nest (without recursing: a deep value would)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            if level <= MAX_JSON_DEPTH:
                stack += [(inner, level + 1)
                          for inner in (item.values() if isinstance(item, dict) else item)]
    return deepest


def foreign_run(tables: dict[str, pd.DataFrame | None], run_id: str) -> tuple[str, str] | None:
    """(table, its other run id) for the first table holding rows of a run other than run_id:
    a run's tables and records hold its own rows only."""
    for name, frame in tables.items():
        if frame is not None and "run_id" in frame.columns:
            others = sorted(map(str, set(frame["run_id"].dropna().unique()) - {run_id}))
            if others:
                return name, others[0]
    return None


class RunDir:
    """results/<scenario>/<run-id>/ as described in docs/results-format.md: read by anyone;
    written only through create() or open(), which hold its writer's lock until close()."""

    def __init__(self, path: Path):
        self.path = path
        self.records_dir = path / "points"
        self.raw_root = path / "raw"
        self._lock: int | None = None
        self._manifest: dict[str, Any] = {}
        self._session: dict[str, Any] | None = None  # this writer's entry in the manifest
        self._resumption: int | None = None  # its index in `resumptions`; None: the first

    @property
    def run_id(self) -> str:
        return self._manifest.get("run_id") or self.path.name

    @classmethod
    def create(cls, results_root: Path, scenario_name: str, kernel_release: str) -> RunDir:
        """A new run of scenario_name under results_root, under an id no other run there has:
        readers tell the runs they read together apart by id, and one results folder is read
        together (`reproduce --check`, `plot`), its scenarios' runs made a second apart or less."""
        parent = results_root / scenario_name
        try:
            parent.mkdir(parents=True, exist_ok=True)
            clash = 0
            while True:
                run_id = new_run_id(kernel_release, clash)
                path = parent / run_id
                try:
                    if any((other / run_id).exists() for other in results_root.iterdir()):
                        raise FileExistsError  # another scenario's run, made this second
                    path.mkdir()
                    break
                except FileExistsError:  # or another run of this scenario
                    clash += 1
        except OSError as exc:
            not_folder = results_root.exists() and not results_root.is_dir()
            raise RunDirError(
                f"{results_root}: " + ("not a folder" if not_folder else
                                       f"cannot hold a run ({os.strerror(exc.errno or 0)})")
                + "; give --out a writable folder") from None
        run = cls(path)
        run._take_lock()
        return run

    @classmethod
    def open(cls, path: Path) -> RunDir:
        """An existing run, to be written: checked before anything in it is touched (a
        wanbench run of this schema, nothing of it outside it, every record readable), then
        locked, and made consistent: a run killed between writing a record and rebuilding
        the tables left them stale, and perhaps its temporary files."""
        run = cls(path)
        if not path.is_dir():
            raise RunDirError(f"{path}: no such run directory")
        version = stored_version(run.read_manifest())
        if version != SCHEMA_VERSION:  # an earlier one: a newer one is not read at all
            raise RunDirError(
                f"{run.manifest_path}: schema_version {version}, an earlier wanbench's: this one "
                f"would add records of version {SCHEMA_VERSION} beside its records; resume it "
                f"with the wanbench that started it, or start a new run")
        for inner in (run.records_dir, run.raw_root):
            if (inner.exists() or inner.is_symlink()) \
                    and not inner.resolve().is_relative_to(path.resolve()):
                raise RunDirError(f"{inner} leads outside the run (to {inner.resolve()}), where "
                                  f"a resume would write and remove files; move its contents "
                                  f"into {inner} instead of the link")
        run._take_lock()
        try:
            run._manifest = run.read_manifest()  # as it is now that no one else writes it
            tables = run.tables()  # every record checked before anything is removed
            foreign = foreign_run(tables, run._manifest["run_id"])
            if foreign:
                raise ResultsFormatError(
                    f"{run.records_dir}: {foreign[0]} rows of run {foreign[1]}, but the "
                    f"manifest is run {run._manifest['run_id']}: records and manifest of "
                    f"different runs; restore the run's own records, or start a new run")
            if tables["points"] is None and run.table_path("points").is_file():
                raise RunDirError(f"{path}: its tables hold finished points but there are no "
                                  f"point records in {run.records_dir} (pruned?): a resume "
                                  f"would measure them all again; start a new run")
            run.remove_temporaries()
            run.write_tables(tables)
        except BaseException:
            run.close()
            raise
        return run

    def close(self) -> None:
        """Let another writer have the run."""
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def __enter__(self) -> RunDir:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _take_lock(self) -> None:
        with self.writing():
            fd = os.open(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise RunDirError(f"{self.path} is being written by another wanbench (PID {holder}); "
                              f"wait for it to end, or stop it, then resume") from None
        except OSError as exc:
            os.close(fd)
            raise RunDirError(f"{self.path}: cannot be locked for writing "
                              f"({os.strerror(exc.errno or 0)}); put the results on a local "
                              f"file system") from None
        with self.writing():
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock = fd

    def unwritable(self, exc: OSError) -> RunDirError:
        """A write into the run that failed, as what to do: free space, or make it writable,
        then resume (the finished points are kept)."""
        fix = STORAGE_FIXES.get(exc.errno or 0, "make it writable")
        where = exc.filename or self.path
        return RunDirError(f"cannot write {where}: {os.strerror(exc.errno or 0)}; {fix}, then "
                           f"continue with: wanbench run --resume {self.path}")

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Writes into the run whose failure is unwritable()."""
        try:
            yield
        except OSError as exc:
            raise self.unwritable(exc) from None

    def remove_temporaries(self) -> None:
        """Atomic writes go through temporaries beside their target; one still there was cut
        short by a kill and holds nothing that was finished. Only those are removed."""
        with self.writing():
            for directory in (self.path, self.records_dir):
                for stale in directory.glob(".*"):
                    if is_temporary(stale) and stale.is_file() and not stale.is_symlink():
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

    def begin_run(self, run: dict[str, Any], session: dict[str, Any]) -> None:
        """A new run's manifest: what it is (run) and its first session's keys beside them."""
        self._manifest = {**run, **session}
        self._session = session
        self._write_manifest()

    def begin_resumption(self, session: dict[str, Any]) -> None:
        """This resumption's session, appended to the manifest's `resumptions`: nothing an
        earlier session recorded is rewritten."""
        resumptions = self._manifest.setdefault("resumptions", [])
        self._resumption = len(resumptions)
        resumptions.append(session)
        self._session = session
        self._write_manifest()

    def save_session(self) -> None:
        """This session's entry again, with what it has recorded since (its topologies
        brought up, its cluster points)."""
        assert self._session is not None, "begin_run or begin_resumption first"
        if self._resumption is None:
            self._manifest.update(self._session)
        else:
            self._manifest["resumptions"][self._resumption] = self._session
        self._write_manifest()

    def _write_manifest(self) -> None:
        with self.writing():
            write_json(self.manifest_path, self._manifest)

    @staticmethod
    def record_name(point_id: str, repetition: int) -> str:
        return f"{point_id}-r{repetition}"

    def raw_dir(self, point_id: str, repetition: int, fresh: bool = False) -> Path:
        """Raw logs of one point × repetition; fresh: emptied of an interrupted attempt's."""
        path = self.raw_root / self.record_name(point_id, repetition)
        with self.writing():
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
        with self.writing():
            write_json(self.records_dir / f"{self.record_name(point_id, repetition)}.json",
                       record)

    def write_attempt(self, point_id: str, repetition: int, attempt: int,
                      record: dict[str, Any]) -> None:
        """An attempt that was measured again (interference): kept, but not in the tables."""
        with self.writing():
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

    def write_tables(self, tables: dict[str, pd.DataFrame | None]) -> None:
        """Write each table (atomically); one without rows is removed."""
        for name, frame in tables.items():
            target = self.table_path(name)
            with self.writing():
                if frame is None:
                    target.unlink(missing_ok=True)
                    continue
                try:
                    with replacing(target) as tmp:
                        frame.to_parquet(tmp, index=False)
                except (pa.ArrowException, TypeError) as exc:  # values Parquet cannot hold
                    raise ResultsFormatError(f"{self.records_dir}: the rows of the {name} "
                                             f"table cannot be stored ({exc}); "
                                             f"{DAMAGED_RECORD}") from None

    def rebuild_tables(self) -> None:
        """Regenerate every Parquet table from the point records (atomically)."""
        self.write_tables(self.tables())
