"""A scenario's own late-send limits: judged by, told to the generator, said under every
table; the reproduction's scenarios keep the rule's defaults."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from clients import validity
from clients.validity import LATE_LIMIT, LATE_THRESHOLD_US, Code, GeneratorFacts, Lateness
from harness.analysis import export
from harness.analysis.summary import PointSummary
from harness.commands.run_terminal import _print_summary
from harness.reproduce.run import scenario_paths
from harness.runner.load_side import hot_spec
from harness.runner.outcome import RunResult
from harness.scenario import ScenarioError, lateness_changes, load, parse, points

BASE = """
name: late
topology: {file: topologies/loopback.yaml}
hot: {generator: sclient, conns: 4, rate_rps: 1000%s}
"""
LOOSER = ", late_us: 2000, late_limit_pct: 5"
# 3 % of 3,000 scheduled sends over the threshold: past the default 1 %, within 5 %
DOCUMENT = {"generator": "sclient", "duration_s": 3.0, "offered_rate_rps": 1000.0,
            "requests": {"scheduled": 3000, "sent": 3000}, "late_sends": 90,
            "late_threshold_us": 2000.0, "replies": {"total": 3000}}


def _scenario(extra: str = ""):
    return parse(BASE % extra)


def _facts(extra: str) -> GeneratorFacts:
    (point,) = points(_scenario(extra))
    spec = hot_spec(point.config, 1, "127.0.0.1:80", None, None)
    return spec.facts(DOCUMENT)


def _late_reasons(extra: str) -> list[Code]:
    facts = _facts(extra)
    late = validity.late_sends(facts.late, facts.scheduled, facts.late_threshold_us,
                               limit=facts.late_limit)
    return [late.code] if late else []


def test_the_defaults_are_the_rules():
    assert Lateness.of("sclient") == Lateness(LATE_THRESHOLD_US["sclient"], LATE_LIMIT)
    assert Lateness.of("sclient").changed("sclient") is None
    assert lateness_changes(_scenario()) == []


def test_a_scenario_states_its_own_limits_and_the_generator_is_told():
    (point,) = points(_scenario(LOOSER))
    spec = hot_spec(point.config, 1, "127.0.0.1:80", None, None)
    assert (spec.late_us, spec.late_limit) == (2000.0, 0.05)
    changed = lateness_changes(_scenario(LOOSER))
    assert changed == ["late-send limits changed by the scenario: 5 % of sends over "
                       "2,000 µs (default 1 % over 1,000 µs)"]


def test_the_same_late_sends_fail_the_default_and_pass_a_looser_limit():
    assert _late_reasons("") == [Code.LATE_SENDS]
    assert _late_reasons(LOOSER) == []
    assert not _facts("").kept_schedule() and _facts(LOOSER).kept_schedule()


def test_a_stricter_limit_fails_what_the_default_passes():
    assert _late_reasons(", late_limit_pct: 5") == []
    assert _late_reasons(", late_limit_pct: 2") == [Code.LATE_SENDS]


def test_interference_is_judged_against_the_scenarios_limit():
    late = validity.late_sends(90, 3000, 1000.0, limit=0.01)
    assert late is not None
    # others held the generator's CPU 2 % of the window: past 1 %, within 5 %
    assert validity.generator_crowded(late, 2.0, 2.0, 2.0, 0.0, limit=0.01) is not None
    assert validity.generator_crowded(late, 2.0, 2.0, 2.0, 0.0, limit=0.05) is None


@pytest.mark.parametrize(("extra", "named"), [
    (", late_limit_pct: 0", "late_limit_pct"), (", late_limit_pct: 150", "late_limit_pct"),
    (", late_us: -1", "late_us"), (", late_us: many", "late_us")])
def test_impossible_limits_are_refused_by_name(extra: str, named: str):
    with pytest.raises(ScenarioError, match=named):
        _scenario(extra)


def test_every_table_says_when_the_limits_changed(tmp_path: Path):
    notes = lateness_changes(_scenario(LOOSER))
    summary = PointSummary(point_id="p", parameters={"cold_conns": 0},
                           medians={"reply_rate_rps": 1000.0},
                           valid=1, total=1, medians_of_invalid=False)
    result = RunResult(0, tmp_path, "late", 1, 1, [summary], None, notes)
    console = Console(record=True, width=100)
    _print_summary(result, console, to_stderr=True)
    assert notes[0] in console.export_text()
    table = export.table([summary], ["reply_rate_rps"])
    assert notes[0] in export.write(table, tmp_path / "t.md", notes).read_text()
    csv = pd.read_csv(export.write(table, tmp_path / "t.csv", notes))
    assert list(csv["note"]) == notes
    assert "note" not in pd.read_csv(export.write(table, tmp_path / "u.csv")).columns


@pytest.mark.parametrize("path", scenario_paths(), ids=lambda p: p.stem)
def test_the_reproductions_scenarios_keep_the_defaults(path: Path):
    assert lateness_changes(load(path)) == []
