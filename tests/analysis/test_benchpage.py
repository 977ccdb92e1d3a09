"""Bench pages read the newest run of each bench scenario, and say which make target measures
one when there is none."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.analysis.benchpage import newest_run
from harness.results.format import ResultsFormatError


def test_the_newest_run_is_read(tmp_path: Path):
    for run_id in ("20261124T101010-k", "20261125T090000-k", "20261123T235959-k"):
        (tmp_path / "bench-wan" / run_id).mkdir(parents=True)
        (tmp_path / "bench-wan" / run_id / "manifest.json").write_text("{}")
    assert newest_run(tmp_path, "bench-wan", "bench-wan").name == "20261125T090000-k"


def test_no_run_names_the_target_that_measures_one(tmp_path: Path):
    with pytest.raises(ResultsFormatError, match="fix: `make bench-servers` measures one"):
        newest_run(tmp_path, "bench-servers-idle", "bench-servers")
