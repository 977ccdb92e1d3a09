"""Combinators of checks that have since been rewritten, kept because the check history
(harness.reproduce.history) rebuilds those checks' previous forms from them: the perf
profile's share of the select functions, which BM98 Table 1 and BMD99 Table 2 were judged
on before the kernel-cost work measured the dispatch call inside the kernel (fc1a84a)."""

from __future__ import annotations

from collections.abc import Callable

from harness.analysis import derive
from harness.reproduce.verdict import Measured, Outcome, Unmeasured


def select_share_of_cpu(dispatch_ratio: float | None = None, at_least_pct: float | None = None,
                        of_busy: bool = False) -> Callable[[Measured], Outcome]:
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
