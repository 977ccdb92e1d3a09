"""The check history: every target has one, each change names a real commit, and each
previous form is a test that gives its own verdict on today's data, both ways."""

from __future__ import annotations

import json
import subprocess
from types import SimpleNamespace

import pandas as pd
import pytest

from harness.analysis.figures import SPECS
from harness.reproduce.forms import FormError, build
from harness.reproduce.history import judge_history, read_history
from harness.reproduce.status import history_markdown
from harness.reproduce.summary import reference_summary
from harness.reproduce.verdict import Status
from tests.conftest import REPO
from tests.reproduce.test_claims import cold_sweep

HISTORY = read_history().changes


def test_every_target_has_a_history():
    assert set(HISTORY) == {spec.id for spec in SPECS}


@pytest.mark.parametrize("commit", sorted({c.commit for past in HISTORY.values() for c in past}))
def test_each_change_names_a_commit_of_the_repository(commit):
    """(The kernel-cost work's commits reach this branch's history at the merge.)"""
    found = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=REPO,
                           capture_output=True)
    assert found.returncode == 0, f"{commit} is no commit of this repository"


def test_each_change_has_a_previous_form_or_says_why_not():
    for past in HISTORY.values():
        for change in past:
            assert change.what and change.reason and change.date
            assert change.previous is not None or change.unrebuilt, change


def test_a_loosened_bound_reads_fail_under_its_previous_form():
    """BMD99 Fig 8's select bound went 0.6 → 0.75 (b72f9ab): select at 0.69 passes today's
    forms' predecessor at 0.75 and fails the 0.6 it had before."""
    today = cold_sweep(select_at_2000=34_500, epoll_at_2000=49_000)  # 0.69, 0.98
    b72f9ab, dc3b568, _ = judge_history("bmd99-fig8", today)
    assert b72f9ab.result.status == Status.FAIL and "= 0.69 ✗" in b72f9ab.result.detail
    assert dc3b568.result.status == Status.PASS
    steep = judge_history("bmd99-fig8", cold_sweep(select_at_2000=25_000, epoll_at_2000=49_000))
    assert steep[0].result.status == Status.PASS


def test_a_form_names_what_it_builds_from():
    """An earlier form is data: a combinator's name and its arguments, or a test of tests."""
    form = {"among": {"test": {"ratio_across": {"metric": "reply_rate_rps",
                                                "column": "cold_conns", "high": 0.75}},
                      "dispatch": "select"}}
    today = cold_sweep(select_at_2000=34_500, epoll_at_2000=49_000)
    assert build(form)(today).numbers.startswith("reply_rate_rps at cold_conns=2000 / at 0 = 0.69")
    for wrong in ({"ratio_acros": {}}, {"ratio_across": {"metric": "x"}},
                  {"on_view": {"view": "by_nothing", "test": form}}, {"a": {}, "b": {}},
                  {"knee_order": {"column": "x", "later": 1, "earlier": 0, "kept_up": "never"}}):
        with pytest.raises(FormError):
            build(wrong)


def test_the_history_renders_a_line_per_change_with_its_verdict():
    today = cold_sweep(select_at_2000=34_500, epoll_at_2000=49_000)
    text = history_markdown({"bmd99-fig8": judge_history("bmd99-fig8", today),
                             "unchanged": [],
                             "cm01-table1": judge_history("cm01-table1", None)})
    assert "- **unchanged**: no change since 7c7e009" in text
    assert "  - b72f9ab (2026-11-26): select's bound 0.6 → 0.75. Reason given: " in text
    assert "The previous form on today's data: FAIL: " in text
    assert "a593f84 (2026-11-25)" in text and "not judged (no run)" in text


def test_the_reference_summary_is_counted_from_the_runs(tmp_path):
    (tmp_path / "reproduce.json").write_text(json.dumps({
        "revision": "3833afd914d0", "seconds": 1774.4, "finished": True,
        "scenarios": [{"run_dir": "results/reference/a/run-a"}]}))
    points = pd.DataFrame({"run_id": ["run-a"] * 4 + ["other"],
                           "valid": [True, True, True, False, True],
                           "steal_server_cpu_pct": [0.0, 0.0, 1.0, 2.3, 50.0],
                           "steal_generator_cpu_pct": [0.0, 0.0, 0.0, 0.0, 50.0]})
    text = reference_summary(tmp_path, SimpleNamespace(points=points))
    assert text == ("The committed runs: from 3833afd, 1 scenario in 29.6 minutes "
                    "(finished); 4 point records, 3 valid (75.0 %); steal on the server's and "
                    "the generator's CPUs median 0.0 %, 95th percentile 1.8 %, at most 2.3 % "
                    "in one window.")
    # a later --only call (`make beyond`) keeps the earlier scenarios' entries: each
    # revision's scenarios are timed by their own seconds, not by the last call's
    (tmp_path / "reproduce.json").write_text(json.dumps({
        "revision": "bbbbbbb", "seconds": 100.0, "finished": True, "scenarios": [
            {"run_dir": "a/run-a", "revision": "aaaaaaa", "seconds": 2400.0},
            {"run_dir": "b/run-b", "revision": "bbbbbbb", "seconds": 100.0}]}))
    text = reference_summary(tmp_path, SimpleNamespace(points=points))
    assert text.startswith("The committed runs: from aaaaaaa, 1 scenario in 40.0 minutes; "
                           "from bbbbbbb, 1 scenario in 1.7 minutes (finished)")
    assert reference_summary(tmp_path / "none", SimpleNamespace(points=points)) is None
