"""Tests of a share in % at one point (the papers' "% of the CPU" and their tables' shares):
within a band about the paper's number or below the paper's own bound, or one dispatch
call's share over another's."""

from __future__ import annotations

from typing import Any

from harness.reproduce.claims.base import Test, coordinates, rounds_spread
from harness.reproduce.verdict import Measured, Outcome, Unmeasured


def _within(value: Any, low: float | None, high: float | None) -> Any:
    """value (or each of a Series) in [low, high); an absent end bounds nothing."""
    return (low is None or value >= low) & (high is None or value < high)


def _band(low: float | None, high: float | None) -> str:
    if high is None:
        return f"≥ {low:.4g} %"
    return f"< {high:.4g} %" if low is None else f"within [{low:.4g}, {high:.4g}) %"


def _idle(m: Measured, where: dict) -> str:
    """The point's CPU idle as text, context beside a share of the CPU: its absence does not
    make the share unmeasured."""
    try:
        return f"{m.median('server_idle_pct', **where):.3g} %"
    except Unmeasured:
        return "not measured"


def share_within(metric: str, low: float | None, high: float | None,
                 paper_idle_pct: float | None = None, **where: object) -> Test:
    """A share (metric, in %) at one point, the median over its valid repetitions, within
    [low, high): the paper's number with its tolerance either way, or the paper's own bound
    where it gives one ("less than 1%"). paper_idle_pct: the paper's idle time at that point,
    printed beside ours, for a share of the CPU, which depends on how busy the CPU was."""

    def test(m: Measured) -> Outcome:
        values = m.values(metric, **where)
        share = float(values.median())
        ok = bool(_within(share, low, high))
        at = coordinates(where)
        spread = ("" if len(values) < 2 else
                  f" ({len(values)} repetitions, {values.min():.3g}-{values.max():.3g} %)")
        idle = ("" if paper_idle_pct is None else
                f"; CPU idle {_idle(m, where)} (the paper's {paper_idle_pct:g} %)")
        return Outcome(ok, f"{at + ': ' if at else ''}{metric} {share:.3g} %{spread}"
                           f"{'' if ok else ' ✗'} ({_band(low, high)}){idle}")

    return test


def share_below(part: str, bound: str, high: float, **where: object) -> Test:
    """A share (part, in %) < high: judged on part where the run timed it; elsewhere shown by
    a measured share that contains it (bound, e.g. accept's in-kernel time around
    alloc_fd's), which passes the claim when below high. A bound at or above high does not
    decide it (what lies inside may still be below): not measured, never a fail."""

    def test(m: Measured) -> Outcome:
        at = coordinates(where)
        at = at + ": " if at else ""
        try:
            value = m.median(part, **where)
        except Unmeasured:
            value = m.median(bound, **where)
            if value >= high:
                raise Unmeasured(f"{part} not timed, and {bound} {value:.3g} %, an upper bound, "
                                 f"is not below {high:g} %") from None
            return Outcome(True, f"{at}{part} not timed; {bound} {value:.3g} % < {high:g} % "
                                 "(an upper bound: the part is inside it)")
        ok = value < high
        return Outcome(ok, f"{at}{part} {value:.3g} %{'' if ok else ' ✗'} (< {high:g} %)")

    return test


SHARE_OF = {"kernel_dispatch_cpu_pct": "of the CPU",
            "kernel_dispatch_share_pct": "of the server's CPU"}


def dispatch_shares(select_over_epoll: float, metric: str = "kernel_dispatch_cpu_pct") -> Test:
    """Each dispatch call's in-kernel share (metric: of the CPU over the window, or, as an
    earlier form of the check took it, of the server's CPU time), both measured, and
    select's / epoll's within each round ≥ select_over_epoll."""

    def test(m: Measured) -> Outcome:
        select, epoll = (m.median(metric, dispatch=d) for d in ("select", "epoll"))
        ratios = m.round_ratios(metric, {"dispatch": "select"}, {"dispatch": "epoll"})
        ratio = float(ratios.median())
        ok = ratio >= select_over_epoll
        return Outcome(ok, f"dispatch call's share {SHARE_OF[metric]}: select {select:.3g} %, "
                           f"epoll {epoll:.3g} %; select / epoll = {ratio:.3g}"
                           f"{rounds_spread(ratios, ratios >= select_over_epoll)}"
                           f"{'' if ok else ' ✗'}")

    return test
