"""Scenarios from anyone: every hostile file and `--set` of scripts/chaos_hostile.py (the one
case table) is refused by the real `wanbench run` at once, exit 2, in one line, without a
traceback, in bounded time and memory.

Before: billion laughs, a 1e9-point range and `.inf` durations ran past a minute and a GB;
/proc/kmsg blocked past SIGTERM; /etc/shadow was printed; 14 inputs were tracebacks."""

from __future__ import annotations

import pytest

from scripts.chaos_hostile import CASES, Case, run_case

# A refusal takes 1-3 s here, mostly imports; the limit leaves room for a loaded machine.
REFUSED_WITHIN_S = 20.0
PEAK_RSS_MB = 400  # a refused run peaks near 125 MB


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_hostile_input_is_refused_in_one_line(case: Case):
    outcome = run_case(case, timeout_s=60)
    assert outcome.problems() == [], outcome.stderr[-2000:]
    assert outcome.seconds < REFUSED_WITHIN_S
    assert outcome.peak_rss_mb < PEAK_RSS_MB
