"""Benchmark: regenerate every figure from synthetic runs, the largest a 1,000-point run.

Writes runs in the documented results format into a temporary directory, then times
`plot_all` (load + derive + render PNG/SVG + index.html) per case with 1 and 2 drawing
processes, side by side in one process, best of ROUNDS. Goal: all figures of a 1,000-point
run in <= 10 s. Prints a Markdown table.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.analysis.prepare import FigureData  # noqa: E402
from harness.analysis.report import plot_all  # noqa: E402
from harness.results.runset import read_runs  # noqa: E402
from tests.analysis.synthetic import (  # noqa: E402
    make_points,
    write_all_scenarios,
    write_run,
)

GOAL_S = 10.0
REPETITIONS = 3
JOBS = (1, 2)  # drawing processes, measured side by side
ROUNDS = 2
# 5 x 2 x 5 x 2 x 10 = 1,000 points, each a figure panel row/series/x value.
GRID_1000 = {
    "cold_conns": [252, 1000, 2000, 4000, 6000],
    "reply_bytes": [1, 6144],
    "dispatch": ["select", "poll", "devpoll", "epoll", "rtsig"],
    "accept": ["single", "multi"],
    "offered_rate_rps": [500.0 * i for i in range(1, 11)],
}


def _time_plot(run_dirs: list[Path], out: Path, jobs: int) -> tuple[float, float, int, int]:
    start = time.perf_counter()
    runs = read_runs(run_dirs)
    loaded = time.perf_counter()
    results = plot_all(runs, out, jobs=jobs)
    done = time.perf_counter()
    rendered = sum(isinstance(r, FigureData) for r in results)
    return loaded - start, done - start, rendered, len(runs.points)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="wanbench-bench-analysis-") as tmp:
        root = Path(tmp)
        big = write_run(root / "big", make_points("cm01-fig6-9-vs-rate", GRID_1000,
                                                  repetitions=REPETITIONS,
                                                  run_id="20261121T235959-6.18.0-synthetic"))
        every = write_all_scenarios(root / "every", repetitions=REPETITIONS)
        cases = [
            ("1,000-point run (cm01-fig6-9-vs-rate, 30 panels)", [big], 1000),
            ("one small run per scenario (16 runs)", every, None),
            ("both together", [big, *every], None),
        ]
        _time_plot(every[:1], root / "warm-up", 1)  # imports, font cache: not measured
        rows = []
        for name, dirs, points in cases:
            for jobs in JOBS:
                # Best of ROUNDS, alternating with the other job count: the machine is shared.
                timings = [_time_plot(dirs, root / "out" / f"{len(rows)}-{r}", jobs)
                           for r in range(ROUNDS)]
                load_s, total_s, rendered, records = min(timings, key=lambda t: t[1])
                rows.append((name, jobs, points or records // REPETITIONS, records, rendered,
                             load_s, total_s))
    load = os.getloadavg()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (during the run)\n")
    print("| case | drawing processes | points | records (x3 reps) | figures | load s "
          "| total s | vs 1 process | goal |")
    print("|---|---|---|---|---|---|---|---|---|")
    serial = {}
    for name, jobs, points, records, rendered, load_s, total_s in rows:
        serial.setdefault(name, total_s)
        verdict = "ok" if total_s <= GOAL_S else "OVER"
        print(f"| {name} | {jobs} | {points} | {records} | {rendered} | {load_s:.2f} "
              f"| {total_s:.2f} | {serial[name] / total_s:.2f}x | <= {GOAL_S:.0f} s {verdict} |")
    return 0 if min(row[6] for row in rows[:len(JOBS)]) <= GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())
