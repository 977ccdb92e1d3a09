"""BM98 Tables 4-5's test: lines fitted to CPU against request rate, one kernel's against
the other's."""

from __future__ import annotations

from harness.analysis import derive
from harness.analysis.derive import KERNEL_LINES
from harness.reproduce.claims.base import Test, combinations, coordinates, rounded
from harness.reproduce.verdict import Measured, Outcome, Unmeasured


def kernel_regressions(old: str, new: str, min_r: float, each: tuple[str, ...]) -> Test:
    """BM98 Tables 4-5 as the paper reads them: idle and kernel-mode CPU against request rate,
    one line per kernel (dispatch: `old` the unmodified kernel, `new` the modified), below
    saturation (derive.regressions). Each line is close (|r| ≥ min_r), the unmodified
    kernel's slopes are steeper (idle falls faster, kernel time grows faster), and its idle
    line's x-intercept (the capacity it extrapolates) is lower. User-mode lines are fitted
    by the paper but their difference "might not be significant": not checked."""

    def test(m: Measured) -> Outcome:
        fits = derive.regressions(m.valid, "request_rate_rps", list(KERNEL_LINES),
                                  [*each, "dispatch"])
        parts, passed = [], True
        for combo in combinations(m, each, {}):
            label = coordinates(combo)
            chosen = fits
            for column, value in combo.items():
                chosen = chosen[chosen[column] == value]
            line = {(row.dispatch, row.metric): row for row in chosen.itertuples()}
            absent = [f"{d} {KERNEL_LINES[y]}" for d in (old, new) for y in KERNEL_LINES
                      if (d, y) not in line]
            if absent:
                raise Unmeasured(f"{label}: no line for {', '.join(absent)}: fewer than 3 valid "
                                 "points below saturation")
            close = all(abs(line[d, y].r) >= min_r for d in (old, new) for y in KERNEL_LINES)
            steeper = (line[old, "server_idle_pct"].slope < line[new, "server_idle_pct"].slope
                       and line[old, "cpu_server_sys_pct"].slope
                       > line[new, "cpu_server_sys_pct"].slope)
            capacity = (line[old, "server_idle_pct"].x_intercept,
                        line[new, "server_idle_pct"].x_intercept)
            higher = capacity[1] > capacity[0]
            passed &= close and steeper and higher
            lines = "; ".join(
                f"{KERNEL_LINES[y]} slope {line[old, y].slope:.3g} vs {line[new, y].slope:.3g}, "
                f"r {line[old, y].r:.2f} vs {line[new, y].r:.2f}" for y in KERNEL_LINES)
            parts.append(f"{label + ': ' if label else ''}{old} vs {new}: {lines}"
                         f"{'' if close else ' ✗ (|r| < ' + str(min_r) + ')'}"
                         f"{'' if steeper else ' ✗ (not steeper)'}; capacity "
                         f"{rounded(capacity[0])} → {rounded(capacity[1])} req/s"
                         f"{'' if higher else ' ✗'}")
        return Outcome(passed, "; ".join(parts))

    return test
