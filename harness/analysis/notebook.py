"""Helpers for the per-paper notebooks: find stored runs, show one target or say why not."""

from __future__ import annotations

import io
import os
from pathlib import Path

from IPython.display import Image, Markdown, display

from harness.analysis.figures import BY_ID
from harness.analysis.plots import draw
from harness.analysis.prepare import Skipped, prepare
from harness.results.runset import RunSet, find_runs, read_runs

REPO = Path(__file__).resolve().parents[2]
DEFAULT_RESULTS = REPO / "results" / "reference"


def results_dir() -> Path:
    """$WANBENCH_RESULTS, else results/reference/ of this checkout."""
    return Path(os.environ.get("WANBENCH_RESULTS") or DEFAULT_RESULTS)


def load() -> RunSet | None:
    """Every run under results_dir(), or None (said plainly) when there is none."""
    root = results_dir()
    runs = find_runs(root) if root.is_dir() else []
    if not runs:
        display(Markdown(f"**No stored runs under `{root}`**: every target below has no data. "
                         "Set `WANBENCH_RESULTS` to a results directory."))
        return None
    loaded = read_runs(runs)
    display(loaded.manifests[["scenario_name", "run_id", "kernel_release", "repetitions"]])
    return loaded


def show(runs: RunSet | None, spec_id: str) -> None:
    """Display the figure and table for one spec, or a one-line reason it has no data."""
    spec = BY_ID[spec_id]
    if runs is None:
        display(Markdown(f"*{spec.target}: no data (no stored runs).*"))
        return
    result = prepare(spec, runs)
    if isinstance(result, Skipped):
        display(Markdown(f"*{spec.target}: no data: {result.reason}.*"))
        return
    buffer = io.BytesIO()
    draw(result).savefig(buffer, format="png")
    display(Image(data=buffer.getvalue()))
    for note in result.notes:
        display(Markdown(f"*{note}*"))
    if result.table is not None:
        display(result.table)
