"""docs/bench-ktrace-hooks.md from made-up windows: each change is against the untraced window
of its round, the hooks' share is told apart from the programs' work, and the 5 % goal is met
or not, both ways, with the hooks alone named when they are over it."""

from __future__ import annotations

import pytest

from scripts.bench_ktrace_hooks import REPO, changes, page

SOURCE = REPO / "results" / "bench" / "bench-ktrace-hooks" / "made-up.json"


def data(hooks_pct: float, traced_pct: float, groups: dict[str, float] | None = None) -> dict:
    """Two rounds; the second machine 10 % slower, which a change within its round hides;
    groups: each group's hooks alone, % (none: a measurement made before group arms)."""
    windows = []
    arms = (("untraced", 0.0), ("hooks", hooks_pct), ("traced", traced_pct),
            *((f"hooks {group}", pct) for group, pct in (groups or {}).items()))
    for round_, scale in ((0, 1.0), (1, 1.1)):
        for arm, server in ((arm, 40.0 * (1 + pct / 100)) for arm, pct in arms):
            windows.append({"round": round_, "arm": arm, "server_cpu_pct": server * scale,
                            "generator_cpu_pct": 30.0 * scale, "steal_cpu0_pct": 0.1,
                            "steal_cpu1_pct": 0.2 * round_,
                            "events_per_s": 500_000.0 if arm == "traced" else None})
    return {"started_at": "2026-11-29T12:00:00+00:00", "revision": "0123456789abcdef",
            "kernel": "6.18.0", "load_average": (0.1, 0.2, 0.3), "rounds": 2, "window_s": 3.0,
            "rate_rps": 40_000, "hot_conns": 50, "windows": windows}


def test_changes_are_within_each_round():
    assert changes(data(2.0, 8.0), "traced", "server_cpu_pct") == pytest.approx([8.0, 8.0])
    assert changes(data(2.0, 8.0), "hooks", "server_cpu_pct") == pytest.approx([2.0, 2.0])


def test_a_goal_met_says_met():
    text = page(data(hooks_pct=1.5, traced_pct=4.0), SOURCE)
    assert "the hooks alone are +1.5 % and the programs' work the rest, +2.5 %" in text
    assert "CPU: met." in text
    assert "| traced | 43.7 | +4.0 % |" in text  # CPU: the median over rounds (41.6, 45.76)
    assert "steal at most 0.2 %" in text and "wanbench 0123456" in text


def test_a_goal_missed_says_so_and_whether_the_hooks_alone_miss_it():
    programs = page(data(hooks_pct=2.0, traced_pct=9.0), SOURCE)
    assert "CPU: NOT met." in programs
    hooks = page(data(hooks_pct=6.0, traced_pct=9.0), SOURCE)
    assert "NOT met; the hooks alone are over it, so no program body can meet it here." \
        in hooks


def test_the_groups_over_the_goal_on_their_own_are_named_and_none_when_none_is():
    over = page(data(9.0, 15.0, {"calls": 7.0, "switch": 1.0, "softirq": 0.5,
                                 "packets": 6.0}), SOURCE)
    assert ("calls +7.0 % (+7.0 to +7.0); switch +1.0 % (+1.0 to +1.0); softirq +0.5 % "
            "(+0.5 to +0.5); packets +6.0 % (+6.0 to +6.0); all of them together +9.0 %, "
            "against the groups' sum of +14.5 %") in over
    assert "Over the 5 % goal on their own: calls, packets: a tracer" in over
    under = page(data(4.0, 6.0, {"calls": 1.0, "switch": 2.5, "softirq": 0.5,
                                 "packets": 0.0}), SOURCE)
    assert "None is over the 5 % goal on its own." in under
    assert "and hooks of one group" in under


def test_a_measurement_without_group_arms_names_no_group():
    text = page(data(2.0, 8.0), SOURCE)
    assert "on their own" not in text and "one group" not in text
