"""Tests of a server against its load: whether it kept up at an offered rate, and what holds
at every rate two series both kept up with (response times, CPU idle), at a curve's highest
rate (the server saturated) or at every rate (no idle left)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from clients.validity import KEEP_UP_FRACTION
from harness.reproduce.claims.base import (
    Test,
    combinations,
    coordinates,
    rounded,
    rounds_spread,
)
from harness.reproduce.verdict import Measured, Outcome, Unmeasured

KeptUp = Callable[..., bool]  # (measured, offered rate, **point) -> whether it kept up


def kept_up_with_sent(m: Measured, rate: float, **where: object) -> bool:
    """The server kept up at an offered rate: its valid records' median replies per request
    the generator sent in the window (derive's replies_per_sent) ≥ KEEP_UP_FRACTION, and none
    had the server saturated (busy, its replies behind the offered rate). Against what was
    sent, because a Poisson schedule sends more or fewer than the nominal rate in a short
    window (at 100 a second, ±10 in one second: a Poisson count's standard deviation is
    its mean's square root); not saturated, because a server that falls behind
    refuses connections, and then the generator sends fewer, which its replies can match."""
    ratio = m.median("replies_per_sent", **where, offered_rate_rps=rate)
    rows = m.rows(**where, offered_rate_rps=rate)
    saturated = rows.get("server_saturated", pd.Series(False, index=rows.index))
    return ratio >= KEEP_UP_FRACTION and not saturated.astype("boolean").fillna(False).any()


def below_both_knees(metric: str, column: str, numerator: object, denominator: object,
                     high: float, strict: bool = False,
                     kept_up: KeptUp = kept_up_with_sent, pooled: bool = False) -> Test:
    """At every offered rate both series kept up with, metric of one / the other's ≤ high
    (< high when strict: a claim that one is lower, which a tie does not pass); each rate's
    ratio the median of its rounds' (pooled: of the two medians over rounds, as earlier forms
    took it)."""

    def inside(value: Any) -> Any:
        return value < high if strict else value <= high

    def ratios_at(m: Measured, rate: float) -> pd.Series:
        at = ({column: numerator, "offered_rate_rps": rate},
              {column: denominator, "offered_rate_rps": rate})
        if pooled:
            return pd.Series([m.median(metric, **at[0]) / m.median(metric, **at[1])])
        return m.round_ratios(metric, *at)

    def kept_up_rates(m: Measured, series: object) -> set:
        return {rate for rate in m.levels("offered_rate_rps", **{column: series})
                if kept_up(m, rate, **{column: series})}

    def test(m: Measured) -> Outcome:
        rates = sorted(kept_up_rates(m, numerator) & kept_up_rates(m, denominator))
        if not rates:
            raise Unmeasured(f"no offered rate that both {numerator} and {denominator} kept up "
                             "with")
        by_rate = {r: ratios_at(m, r) for r in rates}
        medians = {r: float(ratios.median()) for r, ratios in by_rate.items()}
        passed = all(inside(q) for q in medians.values())
        return Outcome(passed, f"{numerator}/{denominator} {metric} at "
                               + ", ".join(f"{rounded(r)}: {medians[r]:.3g}"
                                           + ("" if pooled else
                                              rounds_spread(by_rate[r], inside(by_rate[r])))
                                           for r in rates)
                               + ("" if passed else " ✗"))

    return test


def server_bound_at_saturation(each: tuple[str, ...], **where: object) -> Test:
    """Every curve's saturation point (its highest offered rate) had the server saturated
    (clients.validity.server_saturated: its CPU or budget used up, replies behind the
    offered rate), the generator valid."""

    def test(m: Measured) -> Outcome:
        parts, passed = [], True
        for combo in combinations(m, each, where):
            top = max(m.levels("offered_rate_rps", recorded=True, **combo))
            rows = m.rows(**combo, offered_rate_rps=top)
            if rows.empty:
                m.median("reply_rate_rps", **combo, offered_rate_rps=top)  # raises: why
            saturated = rows["server_saturated"].astype("boolean").fillna(False)
            cpu = pd.to_numeric(rows["cpu_server_pct"], errors="coerce").median()
            ok = bool(saturated.all())
            passed &= ok
            label = coordinates(combo)
            parts.append(f"{label}: at {rounded(top)} offered, server {cpu:.0f} % CPU, "
                         f"{int(saturated.sum())}/{len(rows)} saturated{'' if ok else ' ✗'}")
        return Outcome(passed, "; ".join(parts))

    return test


EXHAUSTED_IDLE_PCT = 2.0  # both benchmarks used all of their CPU (or budget): nothing to tell


def idle_lower(column: str, more_idle: object, less_idle: object,
               each: tuple[str, ...], kept_up: KeptUp = kept_up_with_sent) -> Test:
    """At every offered rate both series kept up with, CPU idle is lower for `less_idle`
    (e.g. with cold connections, or the unmodified kernel) than for `more_idle`, unless both
    had none left; and by at least 10 points somewhere."""

    def test(m: Measured) -> Outcome:
        parts, passed = [], True
        for combo in combinations(m, each, {}):
            more, less = ({**combo, column: series} for series in (more_idle, less_idle))
            common = set(m.levels("offered_rate_rps", **more)) & set(
                m.levels("offered_rate_rps", **less))
            rates = sorted(r for r in common if kept_up(m, r, **more) and kept_up(m, r, **less))
            if not rates:
                raise Unmeasured(f"no offered rate that both {more_idle} and {less_idle} kept "
                                 f"up with ({combo})")
            idle = [(m.median("server_idle_pct", **more, offered_rate_rps=r),
                     m.median("server_idle_pct", **less, offered_rate_rps=r)) for r in rates]
            gaps = [a - b for a, b in idle]
            ok = max(gaps) >= 10 and all(
                g > 0 or max(a, b) <= EXHAUSTED_IDLE_PCT for g, (a, b) in zip(gaps, idle,
                                                                            strict=True))
            passed &= ok
            label = coordinates(combo)
            parts.append(f"{label + ': ' if label else ''}idle at {column} {more_idle} / "
                         f"{less_idle}, at "
                         + ", ".join(f"{rounded(r)}: {a:.0f}/{b:.0f} %" for r, (a, b) in
                                     zip(rates, idle, strict=True))
                         + ("" if ok else " ✗"))
        return Outcome(passed, "; ".join(parts))

    return test


def no_idle(**where: object) -> Test:
    """The curve's CPU idle (server_idle_pct, of its CPU or budget) ≤ EXHAUSTED_IDLE_PCT at
    every offered rate it was measured validly at: "no idle time for all request rates"."""

    def test(m: Measured) -> Outcome:
        rates = m.levels("offered_rate_rps", **where)
        idle = {rate: m.median("server_idle_pct", **where, offered_rate_rps=rate)
                for rate in rates}
        none = {rate: value <= EXHAUSTED_IDLE_PCT for rate, value in idle.items()}
        at = coordinates(where)
        return Outcome(all(none.values()), f"{at + ': ' if at else ''}idle at "
                       + ", ".join(f"{rounded(r)}: {v:.3g} %{'' if none[r] else ' ✗'}"
                                   for r, v in idle.items())
                       + f" (≤ {EXHAUSTED_IDLE_PCT:g} % each)")

    return test
