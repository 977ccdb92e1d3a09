"""REPRODUCTION.md's status table is what `wanbench reproduce --check results/reference`
generates from the committed runs, byte for byte: never edited by hand, never stale."""

from __future__ import annotations

from harness.reproduce.check import check_all
from harness.reproduce.status import BEGIN, END, markdown
from harness.results.runset import read_runs
from tests.conftest import REPO


def test_the_committed_status_table_is_generated_from_the_committed_runs():
    text = (REPO / "REPRODUCTION.md").read_text()
    committed = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    results = check_all(read_runs([REPO / "results" / "reference"]))
    assert committed == markdown(results, "results/reference").strip(), (
        "REPRODUCTION.md is stale: run `wanbench reproduce --check results/reference "
        "--write-status REPRODUCTION.md`")
