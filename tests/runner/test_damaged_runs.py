"""Runs from anyone: every damaged run directory of scripts/chaos_damaged.py (the one case
table) is refused by each command that reads runs, exit 2, in one line naming the damage.

Before: a manifest nested 100,000 deep was a RecursionError traceback (exit 1) in plot,
reproduce --check, noise and run --resume, "internal error" in compare; NaN or infinities in
points.parquet were tracebacks in plot, warnings in compare and a noise record from the
infinities; a table of another run, or a tampered recorded scenario, went unnoticed."""

from __future__ import annotations

import pytest

from harness.results.runset import read_runs
from harness.scenario import recorded
from scripts.chaos_damaged import SOURCE, Damage, cases, run_case


@pytest.mark.parametrize(("damage", "command"), cases(),
                         ids=lambda case: case.name if isinstance(case, Damage) else case)
def test_a_damaged_run_is_refused_in_one_line(damage: Damage, command: str):
    outcome = run_case(damage, command, timeout_s=120)
    assert outcome.problems(damage.says) == [], outcome.stderr[-2000:]


def test_the_intact_run_the_cases_damage_is_read():
    """The other direction: the same run undamaged passes every check of the loader."""
    runs = read_runs([SOURCE], recorded)
    assert len(runs.manifests) == 1 and len(runs.points) > 0
