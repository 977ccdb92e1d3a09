"""Tests no claim takes today, kept because the check history (history.yaml) rebuilds the
earlier forms of checks from them: keeping up judged against the nominal offered rate, the
knee (the highest rate kept up with) of one series against another's, idle's regression line
against request rate, and the perf profile's share of the select functions, which BM98 Table 1
and BMD99 Table 2 were judged on before the dispatch call was timed inside the kernel."""

from __future__ import annotations

import pandas as pd

from clients.validity import KEEP_UP_FRACTION
from harness.analysis import derive
from harness.reproduce.claims.base import Test, combinations, coordinates, rounded
from harness.reproduce.claims.keeping_up import KeptUp, kept_up_with_sent
from harness.reproduce.verdict import Measured, Outcome, Unmeasured


def kept_up_with_offered(m: Measured, rate: float, **where: object) -> bool:
    """The server kept up at an offered rate: its median replies ≥ KEEP_UP_FRACTION of the
    nominal offered rate (kept_up_with_sent judges on what was sent instead)."""
    return m.median("reply_rate_rps", **where, offered_rate_rps=rate) >= KEEP_UP_FRACTION * rate


def _knee(m: Measured, kept_up: KeptUp, **where: object) -> float:
    """The highest offered rate the server kept up with; 0 when it kept up with none."""
    kept = [rate for rate in m.levels("offered_rate_rps", **where) if kept_up(m, rate, **where)]
    return max(kept, default=0.0)


def knee_order(column: str, later: object, earlier: object, each: tuple[str, ...] = (),
               kept_up: KeptUp = kept_up_with_sent) -> Test:
    """`later` keeps up with offered rates at least as high as `earlier` does, and at least
    one of them falls behind somewhere in the sweep (else the sweep never reached a knee)."""

    def test(m: Measured) -> Outcome:
        parts, passed = [], True
        for combo in combinations(m, each, {}):
            top = max(m.levels("offered_rate_rps", recorded=True, **combo))
            late, early = (_knee(m, kept_up, **combo, **{column: s}) for s in (later, earlier))
            ok = late >= early and min(late, early) < top
            passed &= ok
            label = coordinates(combo)
            parts.append(f"{label + ': ' if label else ''}kept up to {later} {rounded(late)}, "
                         f"{earlier} {rounded(early)} of ≤ {rounded(top)} req/s"
                         f"{'' if ok else ' ✗'}")
        return Outcome(passed, "; ".join(parts))

    return test


def idle_regression(each: tuple[str, ...], within_rounds: bool = True) -> Test:
    """CPU idle falls linearly with request rate (r ≤ -0.9, the papers' |r| ≥ 0.92; the line
    fitted within rounds, derive.regressions, or pooled over them), and the capacity it
    predicts (idle = 0) is lower with cold connections."""

    def test(m: Measured) -> Outcome:
        valid = m.valid if within_rounds else m.valid.drop(columns=list(derive.ROUND_COLUMNS))
        fits = derive.regressions(valid, "request_rate_rps", ["server_idle_pct"],
                                  [*each, "cold_conns"])
        if fits.empty:
            raise Unmeasured("fewer than 3 valid points below saturation per curve")
        swept = m.levels("cold_conns", recorded=True)
        parts, passed = [], True
        for key, group in fits.groupby(list(each)) if each else [((), fits)]:
            group = group.sort_values("cold_conns")
            key = key if isinstance(key, tuple) else (key,)
            label = coordinates(dict(zip(each, key, strict=True)))
            unfitted = sorted(int(c) for c in set(swept) - set(group["cold_conns"]))
            if unfitted:
                raise Unmeasured(f"{label}: no line at cold_conns {unfitted}: fewer than 3 "
                                 "valid points below saturation")
            linear = bool((group["r"] <= -0.9).all())
            capacities = group["x_intercept"].tolist()
            falls = capacities[-1] < capacities[0]
            passed &= linear and falls
            rs = ", ".join(f"{r:.2f}" for r in group["r"])
            caps = " → ".join(rounded(c) for c in capacities)
            parts.append(f"{label}: r {rs}{'' if linear else ' ✗'}; capacity {caps} req/s "
                         f"over cold {group['cold_conns'].tolist()}{'' if falls else ' ✗'}")
        return Outcome(passed, "; ".join(parts))

    return test


def select_share_of_cpu(dispatch_ratio: float | None = None, at_least_pct: float | None = None,
                        of_busy: bool = False) -> Test:
    """The select functions' share (derive.SELECT_SYMBOLS, idle loop excluded) of the profile
    samples, per dispatch: of all samples, i.e. of the CPU as BMD99 Table 2 counts it, or
    (of_busy) of the samples that did work, as BM98 Table 1 does on a machine that had none
    idle."""

    def test(m: Measured) -> Outcome:
        if m.profiles.empty:
            raise Unmeasured("no profiles.parquet in the run")
        keys = ["run_id", "point_id", "repetition"]
        working = m.profiles[m.profiles["layer"] != "idle"]
        share = derive.profile_share(working, derive.SELECT_SYMBOLS).set_index(keys)
        if of_busy:
            busy = working.groupby(keys)["pct"].sum()
            share["profile_pct"] = 100 * share["profile_pct"] / busy.reindex(share.index)
        merged = share.reset_index().merge(m.valid, on=keys)
        by = merged.groupby("dispatch")["profile_pct"].median()
        if "select" not in by:
            raise Unmeasured("no valid profiled select point")
        of = "of busy samples" if of_busy else "of the CPU"
        parts, passed = [f"select functions {of}: "
                         + ", ".join(f"{d} {v:.2f} %" for d, v in by.items())], True
        if at_least_pct is not None:
            passed &= by["select"] >= at_least_pct
        if dispatch_ratio is not None:
            if "epoll" not in by:
                raise Unmeasured("no valid profiled epoll point")
            ratio = by["select"] / max(by["epoll"], 0.01)
            passed &= ratio >= dispatch_ratio
            parts.append(f"select/epoll = {ratio:.1f}")
        return Outcome(bool(passed), "; ".join(parts))

    return test


def from_4_connections(m: Measured) -> Measured:
    """cpp Fig 2's records from 4 connections on, where an earlier sweep of it started."""
    return m.with_column("from_4", lambda f: f["client_conns"] >= 4).only(from_4=True)


def busy_counted(m: Measured) -> Measured:
    """The records with no server busy: a point whose server had no CPU to spare counts as
    below saturation, as an earlier form of the regression check took it."""
    return m.with_column("server_busy", lambda f: pd.Series(False, index=f.index))
