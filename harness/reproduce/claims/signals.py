"""CM01's tests of the RT-signal server: SIGIO overflows below and past saturation, and
multi-accept select against it where it still ran on signals."""

from __future__ import annotations

import pandas as pd

from clients.validity import KEEP_UP_FRACTION
from harness.reproduce.claims.base import (
    Test,
    combinations,
    coordinates,
    rounded,
    rounds_spread,
)
from harness.reproduce.claims.views import by_mechanism
from harness.reproduce.verdict import Measured, Outcome, Unmeasured


def overflow_regimes(replied: str = "replies_per_sent", spare_cpu: bool = True) -> Test:
    """CM01 Table 1: no SIGIO overflow below saturation (the server kept up with CPU to
    spare: its records' `replied`, replies per request sent, ≥ KEEP_UP_FRACTION and it not
    busy), overflows past it (the server saturated). A point at the knee, kept up but with all
    its CPU in use, is in neither. Points past saturation count even when invalid (a generator
    falling behind there too does not change the server's own counters; figures.py
    keep_invalid says so). Earlier forms of the check: replied="reply_ratio" (replies per
    nominal offered request), spare_cpu=False (a busy server that kept up counted as below
    saturation)."""

    def test(m: Measured) -> Outcome:
        points = m.all[(m.all.get("dispatch") == "rtsig")]
        if points.empty or "sigio_overflows" not in points:
            raise Unmeasured("no rtsig points with SIGIO counters")
        busy = points["server_busy"].fillna(False).astype(bool)
        saturated = points["server_saturated"].astype("boolean").fillna(False)
        kept_up = points[(points[replied] >= KEEP_UP_FRACTION) & ~saturated
                         & (~busy if spare_cpu else True)]
        behind = points[(points["reply_ratio"] < KEEP_UP_FRACTION) & saturated]
        if kept_up.empty or behind.empty:
            raise Unmeasured(f"{len(kept_up)} records kept up, {len(behind)} were past a "
                             "saturated server's capacity: both regimes are needed")
        below = (kept_up["sigio_overflows"] / kept_up["signals_dequeued"].clip(lower=1)).max()
        above = int(behind["sigio_overflows"].min())
        passed = below <= 0.001 and above > 0
        return Outcome(passed, f"below saturation ({len(kept_up)} records): overflows ≤ "
                               f"{100 * below:.3f} % of dequeues; past saturation "
                               f"({len(behind)}): ≥ {above} overflows")

    return test


def multi_accept_while_signals(low: float, pooled: bool = False) -> Test:
    """CM01 Figs 6-8: multi-accept select's reply rate ≥ low × the RT-signal server's, at
    every offered rate where that server still ran on RT signals (each valid record dequeued
    more signals than its queue overflowed). Where every dequeue was an overflow it ran on
    its multi-accept fallback (CM01 §4.2), and comparing there compares multi-accept select
    with itself: those rates are named, not compared. Each rate's ratio is the median of its
    rounds' (pooled: of the two medians over rounds, as earlier forms took it)."""

    def ratios_at(m: Measured, combo: dict, rate: float) -> pd.Series:
        at = ({**combo, "mechanism": "select/multi", "offered_rate_rps": rate},
              {**combo, "mechanism": "rtsig/multi", "offered_rate_rps": rate})
        if pooled:
            return pd.Series([m.median("reply_rate_rps", **at[0])
                              / m.median("reply_rate_rps", **at[1])])
        return m.round_ratios("reply_rate_rps", *at)

    def on_signals(m: Measured, combo: dict, rate: float) -> bool:
        rows = m.rows(**combo, mechanism="rtsig/multi", offered_rate_rps=rate)
        return bool((rows["signals_dequeued"] > rows["sigio_overflows"]).all())

    def test(m: Measured) -> Outcome:
        if not {"signals_dequeued", "sigio_overflows"} <= set(m.all.columns):
            raise Unmeasured("no signal counters (signals_dequeued, sigio_overflows) in the run")
        m = by_mechanism(m)
        parts, passed = [], True
        for combo in combinations(m, ("cold_conns", "reply_bytes"), {}):
            rates = m.levels("offered_rate_rps", **combo, mechanism="rtsig/multi")
            signals = [r for r in rates if on_signals(m, combo, r)]
            fallback = [rounded(r) for r in rates if r not in signals]
            if not signals:
                raise Unmeasured(f"{coordinates(combo)}: the RT-signal server ran on its fallback "
                                 f"at every rate ({', '.join(fallback)} req/s)")
            by_rate = {r: ratios_at(m, combo, r) for r in signals}
            ratios = {r: float(within.median()) for r, within in by_rate.items()}
            ok = min(ratios.values()) >= low
            passed &= ok
            parts.append(f"{coordinates(combo)}: select/multi / rtsig at "
                         + ", ".join(f"{rounded(r)}: {q:.3g}"
                                     + ("" if pooled else
                                        rounds_spread(by_rate[r], by_rate[r] >= low))
                                     for r, q in ratios.items())
                         + ("" if ok else " ✗")
                         + (f" (fallback, not compared: {', '.join(fallback)})"
                            if fallback else ""))
        return Outcome(passed, "; ".join(parts))

    return test
