"""Damaged run directories through every command that reads runs: each refused at once,
exit 2, in one line naming the damage, without a traceback.

A copy of a small finished run of results/reference is damaged one way per case, then given to
`wanbench plot`, `reproduce --check`, `noise`, `compare` (as the base, an intact copy as the
candidate) and, where the damage is in what a resume reads (the manifest), `run --resume`.
The one case table for `make test-hostile` and tests/runner/test_damaged_runs.py.

Each case runs the command line's own main() in a process forked from one that imported the
commands once (multiprocessing's forkserver, preloaded): the refusal is what is tested, not a
second of interpreter start and imports per case, which `python -m harness.cli` would add."""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import resource
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.cli import COMMANDS  # noqa: E402
from scripts.chaos_hostile import MEMORY_LIMIT_BYTES, REPO, TIMEOUT_S  # noqa: E402

SOURCE = next((REPO / "results/reference/cpp-table1-layers").glob("*/manifest.json")).parent
NESTED = 100_000  # levels of a manifest made to exhaust a recursive reader


def _manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


def _deep(run: Path) -> None:
    (run / "manifest.json").write_text("[" * NESTED + "]" * NESTED)


def _tampered_scenario(run: Path) -> None:
    manifest = _manifest(run)
    manifest["scenario"]["hot"]["conns"] = "lots"
    (run / "manifest.json").write_text(json.dumps(manifest))


def _infinite_in_manifest(run: Path) -> None:
    manifest = _manifest(run)
    manifest["repetitions"] = float("inf")
    (run / "manifest.json").write_text(json.dumps(manifest))  # writes Infinity


def _points_column(run: Path, name: str, value: object) -> None:
    path = run / "points.parquet"
    table = pq.read_table(path)
    column = table[name].to_pylist()
    column[0] = value
    index = table.column_names.index(name)
    table = table.set_column(index, name, pa.array(column, type=table[name].type))
    pq.write_table(table, path)


@dataclass(frozen=True)
class Damage:
    """One way a run directory is damaged, and a fragment of the one line it is refused
    with; resumed: whether `run --resume` reads the damaged part (it rebuilds the tables
    from the records, so a table's damage is not its business)."""

    name: str
    damage: Callable[[Path], None]
    says: str
    resumed: bool


DAMAGES = [
    Damage("manifest-nested-100000", _deep, "nested deeper than", True),
    Damage("manifest-scenario-tampered", _tampered_scenario, "recorded scenario is damaged",
           True),
    Damage("manifest-infinity", _infinite_in_manifest, "not a finite number", True),
    Damage("points-nan", lambda run: _points_column(run, "cpu_server_pct", float("nan")),
           "holds NaN or an infinity", False),
    Damage("points-inf", lambda run: _points_column(run, "cpu_server_pct", float("inf")),
           "holds NaN or an infinity", False),
    Damage("points-run-id", lambda run: _points_column(run, "run_id", "20200101T000000-x"),
           "tables and manifest of different runs", False),
]
READERS = ("plot", "reproduce", "noise", "compare", "resume")
# The forkserver imports these once; each case's child starts with them loaded.
PRELOADED = ["scripts.chaos_damaged", "harness.commands.run_terminal",
             *(COMMANDS[command] for command in ("plot", "reproduce", "noise", "compare", "run"))]


def argv(command: str, run: Path, intact: Path, scratch: Path) -> list[str]:
    return {
        "plot": ["plot", str(run), "--out", str(scratch / "plot")],
        "reproduce": ["reproduce", "--check", str(run.parent)],
        "noise": ["noise", str(run), "--out", str(scratch / "noise.json")],
        "compare": ["compare", str(run), str(intact)],
        "resume": ["run", "--resume", str(run)],
    }[command]


def cases() -> list[tuple[Damage, str]]:
    return [(damage, command) for damage in DAMAGES for command in READERS
            if command != "resume" or damage.resumed]


@dataclass(frozen=True)
class Outcome:
    exit_status: int | None  # None: killed at the deadline
    stderr: str

    def problems(self, says: str) -> list[str]:
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        found = ["hung"] if self.exit_status is None else (
            [f"exit {self.exit_status}"] if self.exit_status != 2 else [])
        if "Traceback" in self.stderr:
            found.append("traceback")
        if len(lines) != 1:
            found.append(f"{len(lines)} lines on stderr")
        if says not in self.stderr:
            found.append(f"no {says!r} in the message")
        return found


def _cli(args: list[str], cwd: Path, stderr: Path) -> None:
    """The child: `wanbench ARGS` in cwd, its stderr to a file, in a session of its own, in
    the address space chaos_hostile gives a whole run (the loaded commands take 0.6 GB)."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    os.setsid()
    os.chdir(cwd)
    os.dup2(os.open(stderr, os.O_WRONLY), 2)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    from harness.cli import main
    sys.exit(main(args))


def _forkserver() -> multiprocessing.context.ForkServerContext:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOADED)
    return context


def run_case(damage: Damage, command: str, timeout_s: float = TIMEOUT_S) -> Outcome:
    with tempfile.TemporaryDirectory(prefix=f"damaged-{damage.name}-") as tmp:
        scratch = Path(tmp)
        run = scratch / "runs" / SOURCE.parent.name / SOURCE.name
        intact = scratch / "intact" / SOURCE.name
        shutil.copytree(SOURCE, run)
        shutil.copytree(SOURCE, intact)
        damage.damage(run)
        err = scratch / "stderr.txt"
        err.touch()  # empty if the child is killed before it writes
        child = _forkserver().Process(target=_cli, args=(argv(command, run, intact, scratch),
                                                         scratch, err))
        child.start()
        child.join(timeout_s)
        hung = child.exitcode is None
        if hung:  # the child and anything it started
            with contextlib.suppress(ProcessLookupError):  # no session yet: nothing started
                os.killpg(child.pid, signal.SIGKILL)
            child.kill()
            child.join()
        return Outcome(None if hung else child.exitcode, err.read_text(errors="replace"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per case")
    args = parser.parse_args()
    failed = []
    for damage, command in cases():
        problems = run_case(damage, command, args.timeout).problems(damage.says)
        if problems:
            failed.append(f"{damage.name}/{command}")
        print(f"{damage.name:28} {command:10} {'; '.join(problems) or 'held'}", flush=True)
    print(f"{len(cases()) - len(failed)} of {len(cases())} held"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
