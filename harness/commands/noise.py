"""`wanbench noise RUN RUN RUN ... [--out FILE]`: record what a second run of the same kernel
moves (A/A runs of one scenario on this machine), for `wanbench compare` to know."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import NoReturn

import pandas as pd

from harness.analysis.compare import noise, samples
from harness.commands import error_text
from harness.results.format import ResultsFormatError


def _one_line_error(message: str) -> NoReturn:
    print(f"wanbench noise: {message}; see `wanbench noise --help`", file=sys.stderr)
    raise SystemExit(2)


def summary(record: noise.NoiseRecord) -> str:
    """Per metric: points with a spread, runs, and the spread's range over the points."""
    spreads = pd.DataFrame([{"metric": s.metric, "runs": s.runs, "sd": s.sd_text,
                             "variance": s.variance} for s in record.spreads])
    lines = [f"noise record: {record.describe()}"]
    for name, group in spreads.groupby("metric", sort=False):
        ordered = group.sort_values("variance")
        low, high = ordered["sd"].iloc[0], ordered["sd"].iloc[-1]
        runs = f"{group['runs'].min()}-{group['runs'].max()}" if group["runs"].nunique() > 1 \
            else str(group["runs"].iloc[0])
        lines.append(f"  {name}: {len(group)} point(s), {runs} runs each, a run's value moves "
                     f"by {low} to {high} (sd)")
    return "\n".join(lines)


def handle(args: argparse.Namespace) -> int:
    try:
        runs = [run for path in args.runs for run in samples.load_runs(path, "RUN")]
        record = noise.record(runs, datetime.now(UTC))
        out = args.out or runs[0].path.parent / noise.RECORD_FILE
        noise.write(record, out)
    except (ResultsFormatError, samples.NotARun, noise.NoiseError, OSError) as exc:
        print(f"wanbench noise: {error_text(exc)}", file=sys.stderr)
        return 2
    print(summary(record))
    print(f"written to {out}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "noise",
        help="record the run-to-run spread of A/A runs, for compare",
        description=(
            "Record how far a second run of the same kernel moves each point's value on this "
            "machine, from A/A runs: at least 3 runs of one scenario and kernel (better 10, "
            "at different times). `wanbench compare` needs it to judge one run per side "
            "(docs/compare.md); it finds it beside the runs (noise.json in their folder) or "
            "takes --noise FILE."),
        epilog="exit status: 0 written; 2 bad input (fewer than 3 runs, runs of different "
               "scenarios, kernels, machines or experiments, no point valid in 3 of the "
               "runs: nothing written) or any error",
    )
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN",
                        help="run directories or folders of runs (A/A: one scenario, one "
                        "kernel, this machine)")
    parser.add_argument("--out", type=Path, help=f"where to write it (default: "
                        f"{noise.RECORD_FILE} in the folder of the first run)")
    parser.error = _one_line_error  # type: ignore[method-assign]
    parser.set_defaults(func=handle)
