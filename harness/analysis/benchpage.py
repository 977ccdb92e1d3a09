"""What the bench pages (docs/bench-*.md) share: the newest run of a bench scenario, the line
that says when, where and beside what load it measured, and the command line that writes the
page (exit 2 with the reason when the runs are missing or malformed)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from clients.paths import REPO_ROOT
from harness.results.format import ResultsFormatError
from harness.results.runset import RunSet, find_runs, read_runs

BENCH_RESULTS = Path("results/bench")


def newest_run(root: Path, scenario: str, make_target: str) -> Path:
    """The newest run directory of `scenario` under root (run ids start with their UTC start
    time); the error names the make target that measures one."""
    runs = find_runs(root / scenario) if (root / scenario).is_dir() else []
    if not runs:
        raise ResultsFormatError(f"{root / scenario}: no run of {scenario}; fix: "
                                 f"`make {make_target}` measures one")
    return runs[-1]


def scenario_runs(runs: RunSet, scenario: str) -> tuple[RunSet, dict]:
    """The runs of `scenario` among those given and the first one's manifest."""
    mine = runs.scenario(scenario)
    if mine.points.empty:
        raise ResultsFormatError(f"no run of {scenario} among the runs given")
    return mine, next(iter(mine.raw_manifests.values()))


def measured_line(manifest: dict, points: pd.DataFrame) -> str:
    """When, where and beside what load a run measured: the figures to read its numbers by."""
    load = ", ".join(f"{v:.2f}" for v in manifest["loadavg_at_start"])
    cpu = manifest["cpu"]
    return (f"Run `{manifest['run_id']}` ({BENCH_RESULTS / manifest['scenario_name']}/), "
            f"started {manifest['created_at']} on kernel {manifest['kernel']['release']}, "
            f"{cpu['model']} × {cpu['count']}, wanbench {manifest['git_revision'][:7]}; load "
            f"average at start {load}; CPU steal per run at most "
            f"{points['steal_pct'].max():.1f} %, other tasks on the server's CPU at most "
            f"{points['other_server_cpu_pct'].max():.0f} %.")


def main(doc: str, page: str, scenarios: tuple[str, ...],
         render: Callable[[RunSet], str]) -> int:
    """A bench page's command line: render docs/PAGE.md from the newest run of each of its
    scenarios under results/bench (or from the runs given), measuring nothing."""
    parser = argparse.ArgumentParser(description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=REPO_ROOT / BENCH_RESULTS,
                        help=f"where `make {page}` keeps its runs (the newest of each "
                             "scenario is read)")
    parser.add_argument("--runs", type=Path, nargs=len(scenarios), metavar="RUN_DIR",
                        help=f"these run directories instead (one of each: "
                             f"{', '.join(scenarios)})")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / f"docs/{page}.md")
    args = parser.parse_args()
    try:
        runs = read_runs(args.runs or [newest_run(args.results, scenario, page)
                                       for scenario in scenarios])
        text = render(runs)
    except ResultsFormatError as exc:
        print(f"{page}: {exc}", file=sys.stderr)
        return 2
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0
