"""docs/bench-clients.md as scripts/bench_clients.py writes it: whole, or the cold section alone."""

from __future__ import annotations

import subprocess
import sys

from scripts.bench_clients import (
    AGREEMENT_TITLE,
    CLOSED_TITLE,
    COLD_TITLE,
    HAND_WRITTEN,
    LATENCY_TITLE,
    MEASURED_TITLES,
    OPEN_TITLE,
    assemble,
    page_sections,
)
from tests.conftest import REPO

OLD_PAGE = f"""# Load generator benchmarks

Measured on an old head.

## {CLOSED_TITLE}

closed table

_18 s_

## {OPEN_TITLE}

open table

## {LATENCY_TITLE}

latency table

## {AGREEMENT_TITLE}

agreement table

## 100,000 cold connections held

old cold table

## {HAND_WRITTEN[0]}

the profile, by hand

## The demo's invalid point: late sends at select, 5,000 idle (#32)

moved to its own page
"""
HEAD = ["# Load generator benchmarks", "", "new head", ""]


def test_measuring_the_cold_section_alone_keeps_every_other_measured_section():
    page, dropped = assemble(HEAD, [(COLD_TITLE, ["new cold table"])], page_sections(OLD_PAGE))
    got = page_sections(page)
    assert list(got) == [*MEASURED_TITLES, HAND_WRITTEN[0]]
    assert got[CLOSED_TITLE] == ["closed table", "", "_18 s_"]
    assert got[AGREEMENT_TITLE] == ["agreement table"]
    assert got[COLD_TITLE] == ["new cold table"]
    assert "old cold table" not in page and "100,000 cold connections held" not in page
    assert got[HAND_WRITTEN[0]] == ["the profile, by hand"]
    assert page.startswith("# Load generator benchmarks\n\nnew head\n")
    # a section this script neither measures nor carries is left out, and said so
    assert "demo's invalid point" not in page
    assert dropped == ["The demo's invalid point: late sends at select, 5,000 idle (#32)"]


def test_a_whole_run_replaces_every_measured_section_and_keeps_the_hand_written_one():
    measured = [(title, [f"new {n}"]) for n, title in enumerate(MEASURED_TITLES)]
    page, _ = assemble(HEAD, measured, page_sections(OLD_PAGE))
    got = page_sections(page)
    assert [got[t] for t in MEASURED_TITLES] == [[f"new {n}"] for n in range(5)]
    assert "closed table" not in page and "old cold table" not in page
    assert got[HAND_WRITTEN[0]] == ["the profile, by hand"]


def test_a_first_page_has_only_what_was_measured():
    page, dropped = assemble(HEAD, [(COLD_TITLE, ["cold"])], {})
    assert list(page_sections(page)) == [COLD_TITLE] and dropped == []


def test_only_cold_without_a_page_to_keep_is_refused_in_one_line(tmp_path):
    r = subprocess.run([sys.executable, "scripts/bench_clients.py", "--only", "cold", "--out",
                        str(tmp_path / "none.md")], cwd=REPO, capture_output=True, text=True,
                       timeout=60, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"bench_clients.py: --only cold: {tmp_path / 'none.md'} has no sections to keep; fix: "
        "run without --only once"]
