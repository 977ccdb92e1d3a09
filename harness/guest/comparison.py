"""The cross-kernel comparison after `wanbench run --kernel`: what each kernel's run counted
(functional results, kept under an emulated CPU too), then the compare machinery's timing
verdict for the first kernel's run against each other whose timings are comparable."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from clients.validity import EMULATED_CPU
from harness.analysis.compare import engine, render
from harness.analysis.compare.report import Refused, build_report
from harness.analysis.compare.samples import NotARun
from harness.guest.record import GuestRecord
from harness.results import verdict
from harness.results.format import ResultsFormatError
from harness.results.runset import read_runs
from harness.results.store import RunDir

# Counted, not timed: these hold under an emulated CPU (summed over points × repetitions).
FUNCTIONAL = {"server_replies": "replies", "errors_total": "errors",
              "timeouts_total": "timeouts", "replies_non_2xx": "non-2xx",
              "sigio_overflows": "SIGIO ovf", "cold_held": "cold held"}
TABLE_WIDTH = 120


def _guest(manifest: dict) -> GuestRecord | None:
    guest = manifest.get("guest")
    return GuestRecord.model_validate(guest) if guest else None


def _where(guest: GuestRecord | None) -> str:
    return "host" if guest is None else f"{guest.accel.upper()} guest"


def functional_table(run_dirs: list[Path]) -> Table:
    runs = read_runs(run_dirs)
    table = Table(title="functional results per kernel (sums over points × repetitions; "
                  "valid: for timing)")
    counted = [c for c in FUNCTIONAL if c in runs.points and runs.points[c].notna().any()]
    table.add_column("kernel", no_wrap=True)
    table.add_column("ran on", no_wrap=True)
    for column in ("points", "valid", *(FUNCTIONAL[c] for c in counted)):
        table.add_column(column, justify="right", min_width=len(column))
    for run_id, manifest in runs.raw_manifests.items():
        frame = runs.points[runs.points["run_id"] == run_id]
        valid = int(verdict.valid(frame).sum())
        cells = [str(manifest["kernel"]["release"]), _where(_guest(manifest)), str(len(frame)),
                 f"{valid}/{len(frame)}"]
        cells += [f"{frame[c].sum():,.0f}" if frame[c].notna().any() else "—" for c in counted]
        table.add_row(*cells)
    return table


def print_comparison(run_dirs: list[Path], console: Console) -> int:
    """Prints the comparison of run_dirs[0] (the base) with each other run; the exit status
    is compare's (0 no regression, 1 regression, 3 inconclusive), 2 when compare refused the
    runs, 0 when there is no pair with comparable timings."""
    if len(run_dirs) < 2:
        console.print("one kernel's run: nothing to compare it with")
        return 0
    # wide enough for every column when stdout is a file or pipe (rich's default is 80 then)
    Console(file=sys.stdout, width=max(Console().width, TABLE_WIDTH)).print(
        functional_table(run_dirs))
    base, candidates = run_dirs[0], run_dirs[1:]
    emulated = [d for d in run_dirs
                if (g := _guest(RunDir(d).read_manifest())) is not None and g.emulated]
    for run_dir in emulated:
        console.print(f"[yellow]{run_dir}[/yellow]: every point invalid for performance "
                      f"({EMULATED_CPU}); its functional results stand above", highlight=False)
    timed = [d for d in candidates if d not in emulated]
    if base in emulated or not timed:
        console.print("timings: no kernel pair with comparable timings (the base and at "
                      "least one candidate must run on a real CPU: host or KVM)")
        return 0
    try:
        report = build_report([base], [[run] for run in timed], engine.Options())
    except (Refused, engine.Incomparable, NotARun, ResultsFormatError) as exc:
        console.print(f"[red]timings not compared[/red]: {exc}", highlight=False)
        return 2
    sys.stdout.write(render.to_markdown(report))
    return report.exit_code
