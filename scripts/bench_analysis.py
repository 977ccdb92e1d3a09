"""Benchmark: `wanbench plot` as users wait for it (issue 32), written to docs/bench-analysis.md.

Times the whole command in a fresh process (start-up and imports included), side by side with
the same command of a base revision (exported with `git archive`), in interleaved rounds:

- the papers' figures of results/reference (`plot --figures papers`), goal <= 10 s;
- one run's generic figures (results/reference/quickstart's run), goal <= 3 s.

This revision is timed three ways: `cold` (an empty cache: everything prepared and drawn),
`cached data` (the cache filled by an earlier plot, a new output folder: every figure drawn
again from cached data) and `unchanged` (the same folder again: nothing to draw). The base has
no cache: each of its runs is cold. Each row gives the wall-clock seconds as min / median / max
and the CPU seconds (user + system of the command and its worker processes), with the load
average and the CPU steal seen during the rounds. Then a profile of one cold plot of each (the
papers' figures, one run's generic figures) in one process, CPU seconds by phase, for both
revisions: drawing split into building the figures' artists, laying them out and writing the
PNG, and writing the SVG.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
REFERENCE = REPO / "results" / "reference"
GOALS_S = {"papers": 10.0, "one run": 3.0}
FIGURES = {"papers": "the papers' figures", "one run": "one run's generic figures"}
# The phases of a plot, timed in one process through the functions both revisions have.
PHASES = """
import sys, time
t0 = time.process_time()
from pathlib import Path
from harness.analysis.plots import render
from harness.analysis.prepare import FigureData, prepare
from harness.analysis.report import applicable, write_report
from harness.results.runset import read_runs
t1 = time.process_time()
from harness.analysis.plots import draw
runs = read_runs([sys.argv[1]])
t2 = time.process_time()
results = [prepare(spec, runs) for spec in applicable(runs, generic=sys.argv[3] == "generic")]
figures = [result for result in results if isinstance(result, FigureData)]
t3 = time.process_time()
for result in figures:
    draw(result)
t4 = time.process_time()
for result in figures:
    render(result, Path(sys.argv[2]) / "png", ("png",))
t5 = time.process_time()
for result in figures:
    render(result, Path(sys.argv[2]) / "figures")
t6 = time.process_time()
write_report(runs, results, Path(sys.argv[2]))
t7 = time.process_time()
# render builds the artists again, then lays them out and writes each format: the PNG's share
# is a PNG-only render's time less the building, the SVG's the rest of a PNG + SVG render
build, png = t4 - t3, t5 - t4
print(t1 - t0, t2 - t1, t3 - t2, build, png - build, (t6 - t5) - png, t7 - t6)
"""
PHASE_NAMES = ("imports", "reading the runs", "preparing (deriving)",
               "drawing: building the figures' artists",
               "drawing: laying out, writing the PNG", "drawing: writing the SVG",
               "index.html (point tables)")
DRAWING = (3, 4, 5)  # PHASE_NAMES' drawing phases


@dataclass
class Case:
    goal: str  # a key of GOALS_S
    side: str  # "base" or "this revision"
    way: str  # cold, cached data, unchanged
    args: list[str]
    wall_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)


def _steal_ticks() -> int:
    return int(Path("/proc/stat").read_text().split("\n")[0].split()[8])


def _cpu_ticks() -> int:
    return sum(int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:8])


def _time(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _export(revision: str, into: Path) -> Path:
    """The base revision's tree (its Python code; results are read from this checkout)."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", revision, "harness", "clients"],
                             check=True, capture_output=True).stdout
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _spread(values: list[float]) -> str:
    return (f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f}"
            if values else "—")


def _profile(tree: Path, runs: Path, figures: str, out: Path) -> list[float]:
    env = {**os.environ, "PYTHONPATH": str(tree), "WANBENCH_CACHE": str(out / "cache")}
    text = subprocess.run([PYTHON, "-c", PHASES, str(runs), str(out), figures], env=env,
                          check=True, capture_output=True, text=True, cwd=tree).stdout
    return [float(v) for v in text.split()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="5c3d027", help="revision to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "bench-analysis.md")
    args = parser.parse_args()
    one_run = sorted((REFERENCE / "quickstart").iterdir())[-1]
    with tempfile.TemporaryDirectory(prefix="wanbench-bench-analysis-") as tmp:
        root = Path(tmp)
        base = _export(args.base, root / "base")
        trees = {"base": base, "this revision": REPO}
        cases = []
        for goal, runs in (("papers", ["--figures", "papers", str(REFERENCE)]),
                           ("one run", [str(one_run)])):
            cases.append(Case(goal, "base", "cold", runs))
            cases += [Case(goal, "this revision", way, runs)
                      for way in ("cold", "cached data", "unchanged")]
        load_before = os.getloadavg()
        steal0, ticks0 = _steal_ticks(), _cpu_ticks()
        for round_ in range(args.rounds):
            for case in cases:
                tree = trees[case.side]
                # cold fills the round's cache; cached data draws from it into a new
                # folder; unchanged plots into that folder again
                cache = root / f"cache-{case.goal}-{case.side}-{round_}"
                folder = {"cold": "cold", "cached data": "cached", "unchanged": "cached"}
                out = root / f"out-{case.goal}-{case.side}-{folder[case.way]}-{round_}"
                env = {**os.environ, "PYTHONPATH": str(tree), "WANBENCH_CACHE": str(cache)}
                wall, cpu = _time([PYTHON, "-m", "harness.cli", "plot", *case.args,
                                   "--out", str(out)], env, tree)
                case.wall_s.append(wall)
                case.cpu_s.append(cpu)
        steal = _steal_ticks() - steal0
        ticks = _cpu_ticks() - ticks0
        load_after = os.getloadavg()
        profiles = {(what, side): _profile(tree, runs, figures,
                                           root / f"profile-{what}-{side.replace(' ', '-')}")
                    for what, runs, figures in (("papers", REFERENCE, "papers"),
                                                ("one run", one_run, "generic"))
                    for side, tree in trees.items()}
    revision = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
    lines = [
        "# Benchmark: `wanbench plot` (`make bench-analysis`)", "",
        "Generated by `scripts/bench_analysis.py` (`make bench-analysis`).", "",
        "\n\n".join(__doc__.split("\n\n")[1:]).strip(), "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, this revision "
        f"{revision} against base {args.base}, on {platform.machine()} × {os.cpu_count()} "
        f"CPUs, Python {platform.python_version()}, {args.rounds} interleaved rounds; load "
        f"average {load_before[0]:.2f} before and {load_after[0]:.2f} after the rounds; CPU "
        f"steal {100 * steal / max(ticks, 1):.1f} % of the machine's CPU time during them.",
        "",
        "| figures | revision | cache | wall s (min / median / max) | CPU s (median) | goal |",
        "|---|---|---|---|---|---|",
    ]
    for case in cases:
        goal = GOALS_S[case.goal]
        verdict = "met" if statistics.median(case.wall_s) <= goal else "not met"
        name = {"papers": "papers' (`--figures papers results/reference`)",
                "one run": f"one run's generic (`{one_run.relative_to(REPO)}`)"}[case.goal]
        lines.append(f"| {name} | {case.side} | {case.way} | {_spread(case.wall_s)} | "
                     f"{statistics.median(case.cpu_s):.1f} | ≤ {goal:.0f} s: {verdict} |")
    for what in GOALS_S:
        mine = {side: p for (of, side), p in profiles.items() if of == what}
        lines += ["", f"Profile of one cold plot of {FIGURES[what]} in one process (CPU s):",
                  "", "| phase | " + " | ".join(mine) + " |", "|---|" + "---|" * len(mine)]
        for i, phase in enumerate(PHASE_NAMES):
            lines.append(f"| {phase} | " + " | ".join(f"{p[i]:.2f}" for p in mine.values())
                         + " |")
        lines.append("| total | " + " | ".join(f"{sum(p):.2f}" for p in mine.values()) + " |")
        ours = mine["this revision"]
        drawing = sum(ours[i] for i in DRAWING)
        lines += ["", f"Drawing is {100 * drawing / sum(ours):.0f} % of this revision's cold plot "
                  f"of {FIGURES[what]} ({drawing:.1f} of {sum(ours):.1f} s of CPU); imports "
                  f"and reading ({ours[0] + ours[1]:.1f} s) are paid by every plot, in one "
                  "process."]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
