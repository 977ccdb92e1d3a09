"""`wanbench run` and its run directory: what a resume may touch, one writer at a time, an
append-only manifest, run ids that cannot collide, and one-line refusals (exit 2) of run
directories, results folders and disks it cannot use."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from clients.atomic import TEMPORARY_SUFFIX
from harness.analysis.compare.compat import differences
from harness.results import format as results_format
from harness.results import store
from harness.results.store import LOCK_FILE, RunDir, RunDirError
from tests.conftest import build, needs_root
from tests.runner.test_run import RESUMABLE

REPO = Path(__file__).resolve().parents[2]
WANBENCH = [sys.executable, "-m", "harness.cli"]

TINY = RESUMABLE.replace("[select, poll, epoll, devpoll]", "[select, epoll]")  # two points


def wanbench(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*WANBENCH, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def runs_under(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob("*/*/manifest.json"))


def assert_refused(done: subprocess.CompletedProcess, *phrases: str) -> str:
    """Exit 2 with one line (the last of stderr; nothing else was printed when the run had not
    started), no traceback, naming what is wrong and how to go on."""
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    line = done.stderr.strip().splitlines()[-1]
    for phrase in phrases:
        assert phrase in line, (phrase, line)
    return line


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished two-point run on loopback, copied by each test that changes it."""
    build("build/bin/wb-server")
    build("build/bin/wb-sclient")
    tmp = tmp_path_factory.mktemp("finished")
    (tmp / "tiny.yaml").write_text(TINY)
    done = wanbench("run", str(tmp / "tiny.yaml"), "--out", str(tmp / "results"),
                    "--allow-invalid")
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = runs_under(tmp / "results")
    return run


def copy_run(finished: Path, tmp_path: Path) -> Path:
    run = tmp_path / "results" / finished.parent.name / finished.name
    shutil.copytree(finished, run, symlinks=True)
    return run


def snapshot(*roots: Path) -> dict[str, bytes]:
    """Every file under roots (not following links) and its content."""
    files = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_symlink():
                files[str(path)] = b"-> " + os.readlink(path).encode()
            elif path.is_file() and path.name != LOCK_FILE:
                files[str(path)] = path.read_bytes()
    return files


def edit_manifest(run: Path, change: Callable[[dict], None]) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    change(manifest)
    (run / "manifest.json").write_text(json.dumps(manifest))


def first_record(run: Path) -> Path:
    return sorted((run / "points").glob("*.json"))[0]


def edit_record(run: Path, change: Callable[[dict], None]) -> None:
    path = first_record(run)
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


def link_points_out(run: Path) -> None:
    outside = run.parent.parent.parent / "elsewhere"
    (run / "points").rename(outside)
    (run / "points").symlink_to(outside)


def prune_records(run: Path) -> None:
    shutil.rmtree(run / "points")  # what `wanbench reproduce --prune-raw` leaves: tables only


# damage to a copy of a finished run -> what the refusal must name
CORRUPT_RUNS: dict[str, tuple[Callable[[Path], None], tuple[str, ...]]] = {
    "not a wanbench run": (lambda run: (run / "manifest.json").write_text('{"name": "x"}'),
                           ("manifest.json", "run_id")),
    "truncated manifest": (lambda run: (run / "manifest.json").write_text(
        (run / "manifest.json").read_text()[:200]), ("manifest.json", "not valid JSON")),
    "manifest not an object": (lambda run: (run / "manifest.json").write_text("[1, 2]"),
                               ("manifest.json", "not a JSON object")),
    "manifest not text": (lambda run: (run / "manifest.json").write_bytes(b"\xa5\x00\xff" * 9),
                          ("manifest.json", "not valid JSON")),
    "unknown schema": (lambda run: edit_manifest(run, lambda m: m.update(schema_version=99)),
                       ("manifest.json", "schema_version 99")),
    "scenario block invalid": (lambda run: edit_manifest(
        run, lambda m: m["scenario"].update(hot="fast")), ("manifest.json", "scenario")),
    "no scenario recorded": (lambda run: edit_manifest(run, lambda m: m.pop("scenario")),
                             ("manifest.json", "scenario")),
    "truncated record": (lambda run: first_record(run).write_text('{"point": {"run_'),
                         ("points/", "not valid JSON", "delete it")),
    "record with a wrong key": (lambda run: edit_record(
        run, lambda r: r.update(pt=r.pop("point"))), ("points/", '"point"', "delete it")),
    "record not an object": (lambda run: first_record(run).write_text("[]"),
                             ("points/", "not a JSON object", "delete it")),
    "record of the wrong types": (lambda run: edit_record(
        run, lambda r: r["point"].update(valid="maybe")), ("valid", "'maybe'", "delete it")),
    "points linked out of the run": (link_points_out, ("points", "outside the run")),
    "record of another run": (lambda run: edit_record(
        run, lambda r: r["point"].update(run_id="20200101T000000-other")),
        ("points", "records and manifest of different runs")),
    "records pruned": (prune_records, ("no point records", "new run")),
}


@pytest.mark.parametrize("damage", CORRUPT_RUNS)
def test_resume_refuses_a_run_it_cannot_use_and_touches_nothing(finished: Path,
                                                                 tmp_path: Path, damage: str):
    run = copy_run(finished, tmp_path)
    change, phrases = CORRUPT_RUNS[damage]
    change(run)
    (run / ".env").write_text("S=1\n")  # the user's, not wanbench's
    points = (run / "points").resolve()
    if points.is_dir():
        (points / ".bash_history").write_text("ls\n")
    before = snapshot(run, tmp_path / "elsewhere")
    assert_refused(wanbench("run", "--resume", str(run)), *phrases)
    assert snapshot(run, tmp_path / "elsewhere") == before


def test_resume_removes_its_own_temporaries_and_nothing_else(finished: Path, tmp_path: Path):
    run = copy_run(finished, tmp_path)
    ours = [run / f".points.parquet.k1ll3d{TEMPORARY_SUFFIX}",
            run / f".manifest.json.x1y2z3{TEMPORARY_SUFFIX}",
            run / "points" / f".{first_record(run).name}.a1b2c3{TEMPORARY_SUFFIX}"]
    for path in ours:
        path.write_text("cut short by a kill")
    theirs = [run / ".env", run / "notes.parquet", run / "points" / ".bash_history",
              run / "points" / ".points.parquet.k1ll3d"]
    for path in theirs:
        path.write_text("the user's")
    done = wanbench("run", "--resume", str(run), "--allow-invalid")
    assert done.returncode == 0, done.stderr[-3000:]
    assert not [path for path in ours if path.exists()]
    assert all(path.read_text() == "the user's" for path in theirs)


def test_resume_with_another_scenario_is_refused_before_the_run_is_touched(finished: Path,
                                                                          tmp_path: Path):
    run = copy_run(finished, tmp_path)
    stale = run / f".manifest.json.x1y2z3{TEMPORARY_SUFFIX}"
    stale.write_text("cut short by a kill")
    (tmp_path / "other.yaml").write_text(TINY.replace("rate_rps: 200", "rate_rps: 300"))
    before = snapshot(run)
    assert_refused(wanbench("run", str(tmp_path / "other.yaml"), "--resume", str(run)),
                   "other.yaml differs from the scenario recorded")
    assert snapshot(run) == before and stale.exists()
    (tmp_path / "same.yaml").write_text(TINY)
    done = wanbench("run", str(tmp_path / "same.yaml"), "--resume", str(run), "--allow-invalid")
    assert done.returncode == 0, done.stderr[-3000:]
    assert not stale.exists()


def test_resume_keeps_the_runs_provenance_and_appends_its_own(finished: Path, tmp_path: Path):
    run = copy_run(finished, tmp_path)
    original = json.loads((run / "manifest.json").read_text())
    for _ in range(2):
        done = wanbench("run", "--resume", str(run), "--allow-invalid")
        assert done.returncode == 0, done.stderr[-3000:]
    manifest = json.loads((run / "manifest.json").read_text())
    resumptions = manifest.pop("resumptions")
    assert manifest == original  # created_at, loadavg_at_start, noise_sources, topology ...
    assert len(resumptions) == 2
    for resumption in resumptions:
        assert resumption["created_at"] >= original["created_at"]
        assert resumption["kernel"] == original["kernel"]
        assert resumption["noise_sources"] and len(resumption["loadavg_at_start"]) == 3
        assert resumption["topology"] == {}  # nothing left to measure: nothing brought up
    assert not differences(original, {**manifest, "resumptions": resumptions}).refused


def test_a_second_writer_is_refused_with_the_holders_pid(finished: Path, tmp_path: Path):
    run = copy_run(finished, tmp_path)
    stale = run / f".manifest.json.x1y2z3{TEMPORARY_SUFFIX}"
    stale.write_text("cut short by a kill")
    holder = RunDir.open(run)
    try:
        stale.write_text("the holder's, being written")
        assert_refused(wanbench("run", "--resume", str(run)), str(run), f"PID {os.getpid()}")
        assert stale.read_text() == "the holder's, being written"
    finally:
        holder.close()
    # the writer gone, the run is free again
    done = wanbench("run", "--resume", str(run), "--allow-invalid")
    assert done.returncode == 0, done.stderr[-3000:]


def test_run_ids_made_in_the_same_second_do_not_collide(tmp_path: Path, monkeypatch):
    now = time.gmtime()
    monkeypatch.setattr(results_format.time, "gmtime", lambda: now)
    runs = [RunDir.create(tmp_path, "demo", "6.1.0-18-amd64") for _ in range(3)]
    for run in runs:
        run.close()
    assert len({run.path for run in runs}) == 3
    assert [run.path.name for run in runs] == sorted(run.path.name for run in runs)
    assert all(results_format.kernel_release_of(run.run_id) == "6.1.0-18-amd64"
               for run in runs)


def test_runs_of_two_scenarios_made_in_the_same_second_have_two_ids(tmp_path: Path,
                                                                    monkeypatch):
    """A results folder is read together (reproduce --check): its runs are told apart by id.
    Before, `reproduce --quick` on half-second windows started two scenarios' runs in one
    second and its check refused the folder, "run ... given twice"."""
    now = time.gmtime()
    monkeypatch.setattr(results_format.time, "gmtime", lambda: now)
    runs = [RunDir.create(tmp_path, scenario, "6.1.0-18-amd64")
            for scenario in ("first", "second", "first")]
    for run in runs:
        run.close()
    assert len({run.run_id for run in runs}) == 3
    assert [run.run_id for run in runs] == sorted(run.run_id for run in runs)
    elsewhere = RunDir.create(tmp_path / "elsewhere", "first", "6.1.0-18-amd64")
    elsewhere.close()
    assert elsewhere.run_id == runs[0].run_id  # another folder's runs are not read with these


def _a_file(tmp_path: Path) -> Path:
    path = tmp_path / "file"
    path.write_text("x")
    return path


def _read_only_folder(tmp_path: Path) -> Path:
    if os.geteuid() != 0:
        pytest.skip("mounting a read-only file system needs root")
    folder = tmp_path / "read-only"
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(folder)],
                   check=True)
    return folder


UNUSABLE_OUT: dict[str, tuple[Callable[[Path], Path], tuple[str, ...]]] = {
    "a file": (_a_file, ("file", "not a folder", "--out")),
    "/dev/null": (lambda _: Path("/dev/null"), ("/dev/null", "not a folder", "--out")),
    "/proc/self": (lambda _: Path("/proc/self"), ("/proc/self", "--out")),
    "a read-only mount": (_read_only_folder, ("Read-only file system", "--out")),
}


@pytest.mark.parametrize("out", UNUSABLE_OUT)
def test_an_unusable_results_folder_is_refused_in_one_line(tmp_path: Path, out: str):
    make, phrases = UNUSABLE_OUT[out]
    folder = make(tmp_path)
    try:
        (tmp_path / "tiny.yaml").write_text(TINY)
        assert_refused(wanbench("run", str(tmp_path / "tiny.yaml"), "--out", str(folder)),
                       *phrases)
    finally:
        if out == "a read-only mount":
            subprocess.run(["umount", str(folder)], check=True)


@needs_root
def test_a_full_disk_stops_the_run_in_one_line_and_resume_finishes_it(tmp_path: Path):
    build("build/bin/wb-server")
    build("build/bin/wb-sclient")
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], check=True)
    try:
        (tmp_path / "tiny.yaml").write_text(TINY)
        proc = subprocess.Popen([*WANBENCH, "run", str(tmp_path / "tiny.yaml"), "--out",
                                 str(disk)], cwd=REPO, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not list(disk.glob("*/*/points/*.json")):
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
            time.sleep(0.02)
        filler = disk / "filler"
        with filler.open("wb", buffering=0) as out:  # full while the second point runs
            try:
                while True:
                    out.write(b"\0" * 65536)
            except OSError:
                pass
        _, stderr = proc.communicate(timeout=60)
        done = subprocess.CompletedProcess(proc.args, proc.returncode, "", stderr)
        (run,) = runs_under(disk)
        assert_refused(done, "No space left on device", f"wanbench run --resume {run}")
        assert len(list((run / "points").glob("*.json"))) == 1  # the first point is kept
        filler.unlink()
        resumed = wanbench("run", "--resume", str(run), "--allow-invalid")
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        points = pd.read_parquet(run / "points.parquet")
        assert sorted(points["dispatch"]) == ["epoll", "select"]
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_a_record_that_cannot_be_written_names_the_fix_and_the_resume(tmp_path: Path,
                                                                      monkeypatch):
    run = RunDir.create(tmp_path, "demo", "6.1.0-18-amd64")

    def full(path: Path, data: bytes) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(store, "write_atomic", full)
    with pytest.raises(RunDirError) as refused:
        run.write_record("aaa", 0, {"point": {}})
    assert str(refused.value) == (
        f"cannot write {run.records_dir / 'aaa-r0.json'}: No space left on device; free space "
        f"on its file system, then continue with: wanbench run --resume {run.path}")
