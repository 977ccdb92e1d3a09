"""The cross-kernel comparison after `wanbench run --kernel`: what each kernel's run counted
(functional results, kept under an emulated CPU too), then the compare machinery's timing
verdict for the first kernel's run against each other whose timings are comparable."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from harness.analysis.compare import engine, render
from harness.analysis.compare.report import Refused, build_report
from harness.analysis.compare.samples import NotARun
from harness.guest.record import GuestRecord
from harness.guest.validity import EMULATED_CPU
from harness.results.format import ResultsFormatError
from harness.results.runset import read_runs
from harness.results.store import RunDir

# Counted, not timed: these hold under an emulated CPU (summed over points × repetitions).
FUNCTIONAL = {"server_replies": "server replies", "errors_total": "errors",
              "timeouts_total": "timeouts", "replies_non_2xx": "non-2xx",
              "sigio_overflows": "SIGIO overflows", "cold_held": "cold held"}


def _guest(manifest: dict) -> GuestRecord | None:
    guest = manifest.get("guest")
    return GuestRecord.model_validate(guest) if guest else None


def _where(guest: GuestRecord | None) -> str:
    return "host" if guest is None else f"guest, {guest.accel.upper()}"


def functional_table(run_dirs: list[Path]) -> Table:
    runs = read_runs(run_dirs)
    table = Table(title="functional results per kernel (sums over points × repetitions)")
    for column in ("kernel", "ran on", "points", "valid for timing", *FUNCTIONAL.values()):
        table.add_column(column, justify="left" if column in ("kernel", "ran on") else "right")
    for run_id, manifest in runs.raw_manifests.items():
        frame = runs.points[runs.points["run_id"] == run_id]
        valid = int(frame["valid"].astype("boolean").fillna(False).sum())
        cells = [str(manifest["kernel"]["release"]), _where(_guest(manifest)), str(len(frame)),
                 f"{valid}/{len(frame)}"]
        cells += [f"{frame[c].sum():,.0f}" if c in frame and frame[c].notna().any() else "—"
                  for c in FUNCTIONAL]
        table.add_row(*cells)
    return table


def print_comparison(run_dirs: list[Path], console: Console) -> int:
    """Prints the comparison of run_dirs[0] (the base) with each other run; the exit status
    is compare's (0 no regression, 1 regression, 3 inconclusive), 2 when nothing could be
    compared, 0 when no candidate has comparable timings."""
    if len(run_dirs) < 2:
        console.print("[yellow]fewer than two kernels ran[/yellow]: nothing to compare")
        return 2
    Console(file=sys.stdout).print(functional_table(run_dirs))
    base, candidates = run_dirs[0], run_dirs[1:]
    emulated = [d for d in run_dirs
                if (g := _guest(RunDir(d).read_manifest())) is not None and g.emulated]
    for run_dir in emulated:
        console.print(f"[yellow]{run_dir.name}[/yellow]: every point invalid for performance "
                      f"({EMULATED_CPU}); its functional results stand above", highlight=False)
    timed = [d for d in candidates if d not in emulated]
    if base in emulated or not timed:
        console.print("timings: no kernel pair with comparable timings (the base and at "
                      "least one candidate must run on a real CPU: host or KVM)")
        return 0
    try:
        report = build_report(base, timed, engine.Options())
    except (Refused, engine.Incomparable, NotARun, ResultsFormatError) as exc:
        console.print(f"[red]timings not compared[/red]: {exc}", highlight=False)
        return 2
    sys.stdout.write(render.to_markdown(report))
    return report.exit_code
