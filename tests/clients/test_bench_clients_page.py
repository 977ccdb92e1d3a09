"""docs/bench-clients.md as scripts/bench_clients.py writes it: whole, or a part alone; the
latency goal's verdict and the default load's runs, rendered from fabricated figures."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from harness import scenario
from scripts.bench_clients import (
    AGREEMENT_TITLE,
    CLOSED_TITLE,
    COLD_TITLE,
    DEFAULT_LOAD_SCENARIO,
    DEFAULT_LOAD_TITLE,
    DEFAULT_LOAD_YAML,
    GENERATOR_CPU,
    HAND_WRITTEN,
    LATENCY_GOAL_US,
    LATENCY_RATE_RPS,
    LATENCY_TITLE,
    MEASURED_TITLES,
    OPEN_TITLE,
    SERVER_CPU,
    LatencySetting,
    assemble,
    default_load_lines,
    latency_table,
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

## Latency resolution at 1,000 req/s

old latency table

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
    # the latency section measured at another rate is carried over under its own title
    assert list(got) == [CLOSED_TITLE, OPEN_TITLE, "Latency resolution at 1,000 req/s",
                         AGREEMENT_TITLE, COLD_TITLE, HAND_WRITTEN[0]]
    assert got["Latency resolution at 1,000 req/s"] == ["old latency table"]
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
    assert list(got) == [*MEASURED_TITLES, HAND_WRITTEN[0]]
    assert [got[t] for t in MEASURED_TITLES] == [[f"new {n}"] for n in range(len(got) - 1)]
    assert "closed table" not in page and "old cold table" not in page
    assert "old latency table" not in page
    assert got[HAND_WRITTEN[0]] == ["the profile, by hand"]


def test_a_first_page_has_only_what_was_measured():
    page, dropped = assemble(HEAD, [(COLD_TITLE, ["cold"])], {})
    assert list(page_sections(page)) == [COLD_TITLE] and dropped == []


def test_measuring_latency_alone_replaces_both_its_sections_and_keeps_the_others():
    measured = [(LATENCY_TITLE, ["new latency table"]), (DEFAULT_LOAD_TITLE, ["20 runs"])]
    page, dropped = assemble(HEAD, measured, page_sections(OLD_PAGE))
    got = page_sections(page)
    assert list(got) == [CLOSED_TITLE, OPEN_TITLE, LATENCY_TITLE, DEFAULT_LOAD_TITLE,
                         AGREEMENT_TITLE, "100,000 cold connections held", HAND_WRITTEN[0]]
    assert got[LATENCY_TITLE] == ["new latency table"] and "old latency table" not in page
    assert got[DEFAULT_LOAD_TITLE] == ["20 runs"]
    assert got["100,000 cold connections held"] == ["old cold table"]
    # the old rate's section is this one measured before, not someone else's
    assert dropped == ["The demo's invalid point: late sends at select, 5,000 idle (#32)"]


@pytest.mark.parametrize("part", ["cold", "latency"])
def test_a_part_alone_without_a_page_to_keep_is_refused_in_one_line(tmp_path, part):
    r = subprocess.run([sys.executable, "scripts/bench_clients.py", "--only", part, "--out",
                        str(tmp_path / "none.md")], cwd=REPO, capture_output=True, text=True,
                       timeout=60, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"bench_clients.py: --only {part}: {tmp_path / 'none.md'} has no sections to keep; "
        "fix: run without --only once"]


def setting(name: str, corrected_minus_paced: list[float]) -> LatencySetting:
    paced = [70.0, 72.0, 74.0]
    return LatencySetting("sclient", name, back_to_back_p50_us=[55.0] * 3, paced_p50_us=paced,
                          uncorrected_p50_us=[60.0] * 3,
                          corrected_p50_us=[p + d for p, d in zip(paced, corrected_minus_paced,
                                                                  strict=True)],
                          cpu_pct=[9.0] * 3)


def test_the_latency_goal_is_met_when_the_median_difference_is_within_it():
    near = setting("near", [-30.0, LATENCY_GOAL_US - 0.5, 2.0])  # median 2 µs; one rep far
    edge = setting("edge", [-LATENCY_GOAL_US] * 3)
    lines = latency_table([near, edge])
    assert near.meets_goal() and edge.meets_goal()
    assert lines[2].split(" | ")[6:8] == ["+2.0 (-30.0 / +9.5 / +2.0)", "met"]
    assert lines[3].split(" | ")[7] == "met"
    assert lines[-1] == (f"Goal: corrected p50 within ±{LATENCY_GOAL_US} µs of the paced "
                         "ping-pong's p50, judged on the median of their difference over 3 "
                         "repetitions. Met by: sclient near, sclient edge; not met by: none.")
    assert f"one request per {1e3 / LATENCY_RATE_RPS:g} ms" in lines[0]


def test_the_latency_goal_is_not_met_when_the_median_difference_is_outside_it():
    late = setting("late", [LATENCY_GOAL_US + 0.1, 50.0, 12.0])
    early = setting("early", [-11.0, -20.0, 0.0])
    lines = latency_table([late, early])
    assert not late.meets_goal() and not early.meets_goal()
    assert lines[2].split(" | ")[6:8] == ["+12.0 (+10.1 / +50.0 / +12.0)", "**not met**"]
    assert lines[3].split(" | ")[6:8] == ["-11.0 (-11.0 / -20.0 / +0.0)", "**not met**"]
    assert lines[-1].endswith("Met by: none; not met by: sclient late, sclient early.")


SCENARIO = {"name": DEFAULT_LOAD_SCENARIO, "repetitions": 20, "warmup_s": 1.0,
            "duration_s": 3.0, "interference_retries": 0,
            "hot": {"generator": "sclient", "conns": 50, "rate_rps": 2000.0, "spin_us": 0},
            "server": {"dispatch": "epoll"}, "cpus": {"server": 0, "generator": 1}}


def runs(invalid: dict[int, str]) -> pd.DataFrame:
    """20 runs at 2,000 req/s; those in `invalid` not valid, for the reason given."""
    bad = set(invalid)
    return pd.DataFrame({
        "repetition": range(20),
        "valid": [rep not in bad for rep in range(20)],
        "invalid_reason": [invalid.get(rep) for rep in range(20)],
        "resp_time_p50_ms": [0.120 + rep / 1000 for rep in range(20)],
        "resp_time_p99_ms": [0.650 + rep / 100 for rep in range(20)],
        "window_s": 3.0,
        "other_generator_cpu_pct": [2.5 if rep in bad else 0.1 for rep in range(20)],
        "other_generator_tasks": ["kdamond.0 2.00 %, python 0.50 %" if rep in bad else
                                  "kworker/1:2 0.10 %" for rep in range(20)],
        "other_generator_measure": "traced",
        "generator_wait_pct": [1.2 if rep in bad else 0.0 for rep in range(20)],
        "generator_wait_others_pct": [1.1 if rep in bad else 0.0 for rep in range(20)],
        "steal_generator_cpu_pct": 0.1,
        "other_server_cpu_pct": 0.2,
        "other_server_tasks": None,
        "other_server_measure": "lower bound: no CAP_BPF",
        "server_wait_pct": 0.0,
        "server_wait_others_pct": None,
        "steal_server_cpu_pct": 0.0,
    })


def test_twenty_valid_runs_say_so_with_their_latency():
    lines = default_load_lines(runs({}), SCENARIO)
    assert lines[0] == "**20 of 20 runs valid** (goal: all of them)."
    assert ("Corrected latency over the 20 valid runs: p50 median 129.5 µs (range "
            "120.0–139.0), p99 median 745.0 µs (range 650.0–840.0).") in lines
    assert "2,000 req/s over 50 hot connections" in lines[2]
    assert "not measured again" in lines[2]
    assert not [line for line in lines if line.startswith("- run")]


def test_each_invalid_run_is_listed_with_its_reason_and_who_ran():
    late = ("late sends: 24 of 6,000 scheduled sends (1.2 %) went out more than 1,000 µs "
            "after their intended time; the generator fell behind")
    crowded = "the server waited for its CPU 30 % of the window while other tasks held CPU 0"
    lines = default_load_lines(runs({7: late, 3: crowded}), SCENARIO)
    assert lines[0] == "**18 of 20 runs valid** (goal: all of them)."
    assert any(line.startswith("Corrected latency over the 18 valid runs: ") for line in lines)
    failures = [line for line in lines if line.startswith("- run")]
    assert [line.split(":")[0] for line in failures] == ["- run 3", "- run 7"]
    assert failures[0].startswith(f"- run 3: {crowded}. ")
    assert failures[1] == (
        f"- run 7: {late}. Generator's CPU: other tasks ran 2.5 % (75.0 ms): kdamond.0 2.00 %, "
        "python 0.50 %; the generator waited for it 1.2 % (36.0 ms), behind other tasks 1.1 % "
        "(33.0 ms); steal 0.1 % (3.0 ms). Server's CPU: other tasks ran 0.2 % (6.0 ms) (lower "
        "bound: no CAP_BPF); the server waited for it 0.0 % (0.0 ms), behind other tasks not "
        "measured; steal 0.0 % (0.0 ms).")


def test_no_valid_run_reports_no_latency():
    lines = default_load_lines(runs(dict.fromkeys(range(20), "steal")), SCENARIO)
    assert lines[0] == "**0 of 20 runs valid** (goal: all of them)."
    assert "No valid run, so no latency to report." in lines


def test_the_default_load_scenario_is_the_load_this_script_describes():
    loaded = scenario.load(DEFAULT_LOAD_YAML)
    assert loaded.name == DEFAULT_LOAD_SCENARIO
    assert (loaded.hot.generator, loaded.hot.conns, loaded.hot.rate_rps, loaded.hot.spin_us) == (
        "sclient", 50, LATENCY_RATE_RPS, 0)
    assert (loaded.cpus.server, loaded.cpus.generator) == (SERVER_CPU, GENERATOR_CPU)
    assert loaded.server.dispatch == "epoll" and loaded.repetitions == 20
    # every failure kept as it happened
    assert loaded.interference_retries == 0
