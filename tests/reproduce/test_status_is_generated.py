"""REPRODUCTION.md's generated blocks (the status table, the reference run's numbers, the
check history, the findings beyond the papers) are what `wanbench reproduce --check
results/reference` generates from the committed runs, byte for byte: never edited by hand,
never stale."""

from __future__ import annotations

from harness.reproduce import beyond
from harness.reproduce.check import check_all, history_all
from harness.reproduce.status import (
    BEGIN,
    BEYOND_BEGIN,
    BEYOND_END,
    END,
    HISTORY_BEGIN,
    HISTORY_END,
    SUMMARY_BEGIN,
    SUMMARY_END,
    history_markdown,
    markdown,
)
from harness.reproduce.summary import reference_summary
from harness.results.runset import read_runs
from tests.conftest import REPO

STALE = ("REPRODUCTION.md is stale: run `wanbench reproduce --check results/reference "
         "--write-status REPRODUCTION.md`")


def block(text: str, begin: str, end: str) -> str:
    return text.split(begin, 1)[1].split(end, 1)[0].strip()


def test_the_committed_status_table_is_generated_from_the_committed_runs():
    text = (REPO / "REPRODUCTION.md").read_text()
    runs = read_runs([REPO / "results" / "reference"])
    assert block(text, BEGIN, END) == markdown(check_all(runs), "results/reference").strip(), \
        STALE
    assert block(text, HISTORY_BEGIN, HISTORY_END) == history_markdown(
        history_all(runs)).strip(), STALE
    assert block(text, SUMMARY_BEGIN, SUMMARY_END) == reference_summary(
        REPO / "results" / "reference", runs), STALE
    assert block(text, BEYOND_BEGIN, BEYOND_END) == beyond.markdown(
        beyond.findings(runs)).strip(), STALE
