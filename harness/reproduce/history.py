"""Every change of a target's check since 7c7e009 (the first checks), as data: its commit,
date, what changed, the reason the commit gives, and the check's previous form rebuilt from
the same combinators (harness.reproduce.claims), so that REPRODUCTION.md can say what the
previous form gives on today's data. A check changed after a run had failed it reads here
beside the verdict its older form still gives."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.reproduce import claims
from harness.reproduce.claims import (
    SYSCALL_SHARE_OF_STACK,
    Test,
    among,
    below_both_knees,
    by_mechanism,
    dispatch_shares,
    flattens,
    grows_at_every_step,
    idle_lower,
    idle_regression,
    kept_up_with_offered,
    knee_order,
    multi_accept_while_signals,
    overflow_regimes,
    peak_ratio,
    ratio_across,
    rises_then_falls,
    share_within,
)
from harness.reproduce.retired import select_share_of_cpu
from harness.reproduce.verdict import ClaimResult, Measured, Outcome, evaluate_claim

FIRST = "7c7e009"
CHECKS_31 = "75b958c"  # the checks rewritten from the papers (#31)


@dataclass(frozen=True)
class Change:
    """One change of a target's check. previous: the form before it, as a test (None when
    its combinator is gone and the form cannot be rebuilt: `unrebuilt` says why)."""

    commit: str
    date: str
    what: str
    reason: str
    previous: Test | None
    unrebuilt: str = ""


def all_of(*tests: Test) -> Test:
    """Several claims as one form: it passes when each does."""

    def test(m: Measured) -> Outcome:
        outcomes = [t(m) for t in tests]
        return Outcome(all(o.passed for o in outcomes), " | ".join(o.numbers for o in outcomes))

    return test


def _from_4_connections(m: Measured) -> Measured:
    """cpp Fig 2's sweep before 3833afd started at 4 connections."""
    return m.with_column("from_4", lambda f: f["client_conns"] >= 4).only(from_4=True)


# every form before 5e3158c judged keeping up against the nominal offered rate
_BM98_DRASTIC_KNEES = among(knee_order("cold_conns", 0, 750, each=("reply_bytes",),
                                       kept_up=kept_up_with_offered),
                            dispatch="select")
_BM98_SELECT_SATURATED = among(claims.server_bound_at_saturation(("reply_bytes", "cold_conns")),
                               dispatch="select")
_BM98_MODIFIED_KNEES = among(knee_order("dispatch", "epoll", "select", each=("reply_bytes",),
                                        kept_up=kept_up_with_offered),
                             cold_conns=750)
_BM98_IDLE_COLD = among(idle_lower("cold_conns", 0, 750, ("reply_bytes",),
                                    kept_up=kept_up_with_offered), dispatch="select")
_SELECT_FALLS_075 = ratio_across("reply_rate_rps", "cold_conns", high=0.75, dispatch="select")
# before dc3b568 a ratio was of the two points' medians (pooled over rounds)
_SELECT_FALLS_075_POOLED = ratio_across("reply_rate_rps", "cold_conns", high=0.75, pooled=True,
                                        dispatch="select")
_EPOLL_AT_2000 = ratio_across("reply_rate_rps", "cold_conns", low=0.9, dispatch="epoll")
_CM01_ENDS = all_of(
    ratio_across("cpu_server_pct", "total_conns", high=1.5, dispatch="rtsig",
                 each=("offered_rate_rps",)),
    ratio_across("resp_time_mean_ms", "total_conns", high=2.0, dispatch="rtsig",
                 each=("offered_rate_rps",)),
    ratio_across("cpu_server_pct", "total_conns", low=2.0, dispatch="select",
                 each=("offered_rate_rps",)))
_CPP_FIG2_RATIO = ratio_across("content_throughput_mbps", "client_conns", low=1.5,
                               one_way_delay_ms=0)
_REMOVED = "its combinator (compare_series, at the highest rate both served) is gone"

# this branch's changes: kept up on what was sent, and ratios within rounds; shares of the
# CPU at the papers' load; the claims dropped along the way restored
_SENT = "5e3158c"
_SHARES = "7430a2a"
_RESTORED = "7d8c187"
_SENT_WHY = ("a Poisson schedule sends 82-102 requests a second at a nominal 100, all "
             "answered, which the nominal rate called falling behind (BM98 Fig 4's 100 req/s)")
_SHARES_WHY = ("the papers' shares are of the machine's CPU at their load; of the server's "
               "own CPU time a share is capped at 100 % and already 43-60 % at 0 cold, and a "
               "one-sided bound let any share above it (88 %) or below it (0) pass")
_RESTORED_WHY = "the paper's claim at its strength, dropped or never checked before"


def _busy_counted(m: Measured) -> Measured:
    """Records whose busy servers count as having CPU to spare, as regressions read before
    b72f9ab left them out."""
    return m.with_column("server_busy", lambda f: pd.Series(False, index=f.index))


_KERNEL_COST = "fc1a84a"  # kernel cost measured inside the kernel (the kernel-cost work)
_KERNEL_WHY = ("'Kernel cost measured inside the kernel where the papers measured it (#30, "
               "#31)'")
_SHARE_DEFECT = ("a dispatch share over 100 % of the server's CPU is not measured (473ba22, a "
                 "defect in the check)")
_ONE_LEVEL_DEFECT = ("a flat-curve check of one level is not measured (9abc488, a defect in the "
                     "check)")


def _defect(commit: str, what: str) -> Change:
    """A fix inside the kernel-cost work's own combinator: the form before it is that
    combinator's defect, not a check to rebuild."""
    return Change(commit, "2026-11-26", what, "a defect in the check", None,
                  "the defect was inside the combinator it fixed")


HISTORY: dict[str, tuple[Change, ...]] = {
    "bm98-fig1": (
        Change(_KERNEL_COST, "2026-11-26",
               "server CPU at 2000 cold ≥ 2× at 0 → select's in-kernel share of the server's "
               "CPU rising at every step (≥ 2×) and flattening (traced)", _KERNEL_WHY,
               ratio_across("cpu_server_pct", "cold_conns", low=2.0, each=("hot_conns",))),
        _defect("473ba22", _SHARE_DEFECT),
        Change(_SHARES, "2026-11-28",
               "select's in-kernel share of the server's CPU → of the CPU over the window (the "
               "server alone on it); the bend within rounds", _SHARES_WHY,
               all_of(grows_at_every_step("kernel_dispatch_share_pct", "cold_conns", low=2.0,
                                          each=("hot_conns",)),
                      flattens("kernel_dispatch_share_pct", "cold_conns", each=("hot_conns",),
                               pooled=True))),
    ),
    "bm98-table1-2": (
        Change("9169b16", "2026-11-25",
               "select functions ≥ 10 % of the CPU → ≥ 20 % of the busy samples",
               "the paper's machine had no idle time, so its Table 1 counts busy samples",
               select_share_of_cpu(at_least_pct=10)),
        Change(_KERNEL_COST, "2026-11-26",
               "select functions' share of the busy profile samples → the dispatch call's "
               "in-kernel share of the server's CPU (traced)", _KERNEL_WHY,
               select_share_of_cpu(at_least_pct=20, of_busy=True)),
        _defect("473ba22", _SHARE_DEFECT),
        Change("040b080", "2026-11-26",
               "ufalloc: 'not measured at function grain' → alloc_fd's in-kernel share of the "
               "server's CPU ≥ 8.9 % (the paper's 17.8 % with half as tolerance) where fentry "
               "times it",
               "wb-ktrace gained function grain (fentry on alloc_fd, #30)",
               None, "the previous form could not pass: it said the function was not timed"),
        Change(_SHARES, "2026-11-28",
               "select's in-kernel share ≥ 10 % of the server's CPU → 21.91 % of the CPU within "
               "a factor of 2 either way; ufalloc's alloc_fd share ≥ 8.9 % of the server's "
               "CPU (fentry) → NOT POSSIBLE HERE (the old linear search), and Table 2's "
               "'virtually none' (< 0.90 %, accept's share an upper bound) added",
               _SHARES_WHY + "; no kernel here has the 1998 linear descriptor search",
               all_of(share_within("kernel_dispatch_share_pct", 10.0, None),
                      share_within("kernel_alloc_fd_share_pct", 17.79 / 2, None))),
    ),
    "bm98-fig3-5": (
        Change("4eecaee", "2026-11-25",
               "the knee and saturation claims look at select's curves only; the modified "
               "kernel's claims added (epoll at 750 cold)",
               "the scenario gained the modified kernel's curve",
               knee_order("cold_conns", 0, 750, each=("reply_bytes",),
                          kept_up=kept_up_with_offered)),
        Change("46be0ed", "2026-11-25",
               "claim dropped: the modified kernel at 750 cold keeps up with the naive "
               "benchmark's rates ('nearly independent')",
               "epoll's naive curve is not run",
               lambda m: knee_order("curve", "epoll@750", "select@0",
                                    kept_up=kept_up_with_offered)(m.with_column(
                   "curve", lambda f: f["dispatch"] + "@" + f["cold_conns"].astype(str)))),
        Change(CHECKS_31, "2026-11-26",
               "knees (kept up to) → saturation throughput (peak reply rate), strictly "
               "higher for the modified kernel; realistic ≤ 0.8× naive; Fig 5's lower "
               "response times added",
               "the paper's 'saturation throughput' is the curve's final point; a tie passed "
               "'higher' (both knees at 20,000 once)",
               all_of(_BM98_DRASTIC_KNEES, _BM98_SELECT_SATURATED, _BM98_MODIFIED_KNEES)),
        Change(_SENT, "2026-11-28", "kept up judged on the requests sent, not the nominal "
               "rate (Fig 5's response times compared at 100 req/s too)", _SENT_WHY,
               among(below_both_knees("resp_time_mean_ms", "dispatch", "epoll", "select",
                                      high=1.0, strict=True, kept_up=kept_up_with_offered),
                     cold_conns=750, reply_bytes=8192)),
        Change(_RESTORED, "2026-11-28",
               "claim restored: the modified kernel (epoll) at 750 cold within 10 % of the naive "
               "benchmark's saturation throughput, 1259-byte files ('nearly independent')",
               _RESTORED_WHY, None, "the claim was not checked before"),
    ),
    "bm98-fig4-6": (
        Change("3d5dade", "2026-11-25",
               "idle compared only at rates both benchmarks kept up with (unless both had "
               "none left), by ≥ 10 points somewhere",
               "compare what the papers compare: a saturated server's idle is cut off at 0",
               None, "its form (idle lower at every rate both measured validly) lived inside "
                     "the combinator it replaced"),
        Change("4eecaee", "2026-11-25",
               "claim added: the modified kernel (epoll) leaves more idle than select at 750 "
               "cold", "the scenario gained the modified kernel's curve", _BM98_IDLE_COLD),
        Change(_SENT, "2026-11-28", "kept up judged on the requests sent, not the nominal "
               "rate: idle compared at 100 req/s, the paper's thttpd point, too", _SENT_WHY,
               all_of(_BM98_IDLE_COLD,
                      among(idle_lower("dispatch", "epoll", "select", ("reply_bytes",),
                                       kept_up=kept_up_with_offered), cold_conns=750))),
        Change(_RESTORED, "2026-11-28",
               "claim added: with 8 KB files the unmodified kernel has no idle time at any rate "
               "(Fig 6)", _RESTORED_WHY, None, "the claim was not checked before"),
    ),
    "bm98-fig9": (
        Change("cd660a1", "2026-11-26",
               "claim added: the modified kernel's (epoll's) throughput at 2000 cold ≥ 0.8× "
               "at 0", "the scenario gained the modified kernel's curve",
               _SELECT_FALLS_075_POOLED),
    ),
    "bm98-tables-4-5": (
        Change("4eecaee", "2026-11-25", "the regression looks at select's curves only",
               "the scenario gained the modified kernel's curve",
               idle_regression(("reply_bytes",), within_rounds=False)),
        Change("b72f9ab", "2026-11-26",
               "the line fitted on points below saturation with CPU to spare, not every point "
               "that kept up; a curve with fewer than 3 such points fails the check, where it "
               "was left out", "a busy server's idle is cut off at 0: the point cannot lie on "
               "the line",
               lambda m: among(idle_regression(("reply_bytes",), within_rounds=False),
                               dispatch="select")(_busy_counted(m))),
        Change("dc3b568", "2026-11-26", "the line fitted within rounds, not pooled",
               "rounds drift: a whole round sits a few points of idle higher",
               among(idle_regression(("reply_bytes",), within_rounds=False),
                     dispatch="select")),
        Change(CHECKS_31, "2026-11-26",
               "naive vs realistic idle lines → the unmodified vs the modified kernel's idle "
               "and kernel lines at 750 cold, slopes and x-intercepts compared",
               "the paper's Tables 4-5 compare the old kernel with the new",
               among(idle_regression(("reply_bytes",)), dispatch="select")),
    ),
    "bm98-ufalloc": (
        Change(_KERNEL_COST, "2026-11-26",
               "epoll's CPU per accepted connection ≤ 1.5× → accept's in-kernel ns per call "
               "rising at every step (the old kernel's linear search; traced)", _KERNEL_WHY,
               ratio_across("cpu_us_per_conn", "cold_conns", high=1.5, dispatch="epoll")),
        Change(_SHARES, "2026-11-28",
               "the old linear search's rise → NOT POSSIBLE HERE; the new ufalloc's bitmap "
               "(accept flat with open descriptors, within 2×) checked instead",
               "today's Linux allocates descriptors from a bitmap like the paper's new "
               "ufalloc: no kernel here has the old one, which a FAIL blamed on this kernel",
               grows_at_every_step("kernel_accept_ns_per_call", "cold_conns", low=2.0,
                                   each=("dispatch",))),
    ),
    "bmd99-fig8": (
        Change("b72f9ab", "2026-11-26", "select's bound 0.6 → 0.75",
               "'BMD99 Fig 8's select bound is BM98 Fig 9's for the same measure (the text "
               "gives none)' (#31: the run before had read 0.69 against 0.6)",
               all_of(ratio_across("reply_rate_rps", "cold_conns", high=0.6, pooled=True,
                                   dispatch="select"),
                      ratio_across("reply_rate_rps", "cold_conns", low=0.9, pooled=True,
                                   dispatch="epoll"))),
        Change("dc3b568", "2026-11-26",
               "ratio of medians → median of within-round ratios",
               "a slow round covered a whole curve (epoll's first round 20 % slower)",
               all_of(_SELECT_FALLS_075_POOLED,
                      ratio_across("reply_rate_rps", "cold_conns", low=0.9, pooled=True,
                                   dispatch="epoll"))),
        Change(CHECKS_31, "2026-11-26",
               "epoll at every cold count, not 2000 only; select < 0.9× (the negation of "
               "epoll's band) instead of ≤ 0.75×",
               "the paper's 'independently of the number of cold connections' is about the "
               "whole curve; its 'select() does not' gives no number",
               all_of(_SELECT_FALLS_075, _EPOLL_AT_2000)),
    ),
    "bmd99-fig9": (
        Change("3d5dade", "2026-11-25",
               "latency at every rate both kept up with, not at the highest rate both served",
               "compare what the paper compares", None, _REMOVED),
        Change(CHECKS_31, "2026-11-26", "knees (kept up to, a tie passing) → peak reply rates, "
               "strictly higher", "the paper's 1348 vs 1291 req/s are saturation loads; a "
               "tie (both at 4,000) passed 'somewhat higher'",
               all_of(knee_order("dispatch", "epoll", "select", kept_up=kept_up_with_offered),
                      below_both_knees("resp_time_mean_ms", "dispatch", "epoll", "select",
                                       high=0.5, kept_up=kept_up_with_offered))),
        Change(_SENT, "2026-11-28", "kept up judged on the requests sent, not the nominal "
               "rate", _SENT_WHY,
               below_both_knees("resp_time_mean_ms", "dispatch", "epoll", "select", high=0.5,
                                kept_up=kept_up_with_offered)),
    ),
    "bmd99-table2": (
        Change(_KERNEL_COST, "2026-11-26",
               "select functions' profile share ≥ 10× epoll's (epoll's floored at 0.01 %) → "
               "the dispatch call's in-kernel share of the server's CPU (traced)", _KERNEL_WHY,
               select_share_of_cpu(dispatch_ratio=10)),
        _defect("473ba22", _SHARE_DEFECT),
        Change(_SHARES, "2026-11-28",
               "select / epoll of each one's share of its server's CPU ≥ 34 → each a share of "
               "the CPU: select's 34 % within a factor of 2, epoll's < 1 %, and their ratio "
               "≥ 34 within rounds", _SHARES_WHY,
               dispatch_shares(select_over_epoll=34.0, metric="kernel_dispatch_share_pct")),
    ),
    "cm01-fig3-5": (
        Change("cd660a1", "2026-11-26", "swept over total connections, not cold ones",
               "the scenario's connections became persistent ones that rotate, as the "
               "paper's httperf's",
               all_of(*(ratio_across(metric, "cold_conns", low=low, high=high, pooled=True,
                                     dispatch=d, each=("offered_rate_rps",))
                        for metric, low, high, d in (("cpu_server_pct", None, 1.5, "rtsig"),
                                                     ("resp_time_mean_ms", None, 2.0, "rtsig"),
                                                     ("cpu_server_pct", 2.0, None, "select"))))),
        Change(CHECKS_31, "2026-11-26",
               "RT signals' CPU and response time flat at every connection count, both ways",
               "the paper's 'insensitive' and 'independent' are about the whole curve",
               _CM01_ENDS),
    ),
    "cm01-fig6-9": (
        Change("3d5dade", "2026-11-25", "peak reply rates compared, not the highest rate's",
               "compare what the paper compares", None, _REMOVED),
        Change("26c678e", "2026-11-26", "against the RT-signal server with Table 1's queue and "
               "multi-accept fallback (rtsig/multi), not rtsig/single",
               "CM01 §4.2: past saturation 'identical to the multi-accept select server'",
               lambda m: peak_ratio("mechanism", "select/multi", "rtsig/single", low=0.9,
                                    each=("cold_conns", "reply_bytes"))(by_mechanism(m))),
        Change(CHECKS_31, "2026-11-26",
               "compared only at rates where RT signals were still signals (dequeues > "
               "overflows); fallback rates named",
               "at 10,000 req/s every dequeue was an overflow: the check compared multi-accept "
               "select with itself",
               lambda m: peak_ratio("mechanism", "select/multi", "rtsig/multi", low=0.9,
                                    each=("cold_conns", "reply_bytes"))(by_mechanism(m))),
        Change(_RESTORED, "2026-11-28",
               "claims restored: the peaks similar (within 10 %, both ways), multi-accept "
               "select's higher in the first two cases",
               _RESTORED_WHY + " (the paper's claim is about the peaks)",
               multi_accept_while_signals(low=0.9)),
    ),
    "cm01-table1": (
        Change("a593f84", "2026-11-25",
               "below saturation means kept up with CPU to spare (a point at the knee is in "
               "neither regime)", "the budget a scenario fixes reaches the analysis",
               overflow_regimes(replied="reply_ratio", spare_cpu=False)),
        Change(_SENT, "2026-11-28", "below saturation: replies judged on the requests sent",
               _SENT_WHY, overflow_regimes(replied="reply_ratio")),
    ),
    "cpp-fig4": (
        Change("fe10b62", "2026-11-25", "highest / lowest ≤ 1.3 → within 1.3× either way",
               "'flat' bounds a fall as well as a rise",
               ratio_across("cycles_per_packet", "stream_mbps", high=1.3, pooled=True)),
        Change(_KERNEL_COST, "2026-11-26",
               "the CPU's estimated cycles per packet → the stack's in-kernel ns per packet "
               "(traced)", _KERNEL_WHY,
               ratio_across("cycles_per_packet", "stream_mbps", low=1 / 1.3, high=1.3)),
        _defect("9abc488", _ONE_LEVEL_DEFECT),
    ),
    "cpp-fig5": (
        Change("c2b9dfb", "2026-11-26",
               "the CPU's estimated cycles per packet → the network stack's own, from a cycles "
               "profile (NOT POSSIBLE HERE without counters)",
               "the paper's cycles are the stack's functions'; a guest's busy time is mostly "
               "the wake-up per packet",
               ratio_across("cycles_per_packet", "stream_conns", low=1.5, pooled=True)),
        Change(_KERNEL_COST, "2026-11-26",
               "the stack's cycles from a cycles profile (NOT POSSIBLE HERE) → the stack's "
               "in-kernel ns per packet (traced)", _KERNEL_WHY, None,
               "it needed hardware counters, which this machine has not"),
    ),
    "cpp-fig6": (
        Change("c2b9dfb", "2026-11-26",
               "the CPU's estimated cycles per packet → the network stack's own, from a cycles "
               "profile (NOT POSSIBLE HERE without counters)",
               "as cpp Fig 5", ratio_across("cycles_per_packet", "one_way_delay_ms",
                                            low=1.15, pooled=True)),
        Change(_KERNEL_COST, "2026-11-26",
               "the stack's cycles from a cycles profile (NOT POSSIBLE HERE) → the system-call "
               "layer's in-kernel ns per packet (traced)", _KERNEL_WHY, None,
               "it needed hardware counters, which this machine has not"),
        _defect("9abc488", _ONE_LEVEL_DEFECT),
    ),
    "cpp-fig2": (
        Change("3833afd", "2026-11-26", "the scenario sweeps from 1 connection, not 4",
               "'cpp Fig 2 crosses from round-trip-bound to server-bound as the paper's did' "
               "(#31: 4 → 1,024 had read 0.79-1.19 in seven runs)",
               lambda m: _CPP_FIG2_RATIO(_from_4_connections(m))),
        Change(CHECKS_31, "2026-11-26", "'then starts decreasing slowly' checked too",
               "the paper's sentence has two halves", _CPP_FIG2_RATIO),
        Change(_SENT, "2026-11-28", "the fall to the last count taken within rounds, not as "
               "a ratio of two medians",
               "every other check takes ratios within a round; across rounds the verdict was "
               "the aggregation's (0.738 against 0.756 within)",
               rises_then_falls("content_throughput_mbps", "client_conns", rise=1.5,
                                floor=0.75, pooled=True, one_way_delay_ms=0)),
    ),
    "cpp-fig3": (
        Change("fe10b62", "2026-11-25", "needs an emulated link that holds at load",
               "the userspace emulator shared the generator's CPU and starved it",
               lambda m: ratio_across("content_throughput_mbps", "one_way_delay_ms", high=0.9,
                                      pooled=True,
                                      client_conns=max(m.levels("client_conns", True)))(m)),
    ),
    "cpp-table1": (
        Change(_KERNEL_COST, "2026-11-26",
               "per-layer counters (NOT POSSIBLE HERE) → per-layer in-kernel ns per packet "
               "(traced)", _KERNEL_WHY, None, "it needed hardware counters, which this "
                                             "machine has not"),
        Change(_SHARES, "2026-11-28",
               "the system-call layer ≤ 20 % of the stack → within the paper's 18-20 %",
               "a one-sided bound let a share of 0 pass where the paper gives 18.5-19.8 % in "
               "every row",
               lambda m: share_within("syscall_share_of_stack_pct", None, 20.0)(
                   SYSCALL_SHARE_OF_STACK(m))),
    ),
}


@dataclass(frozen=True)
class PastVerdict:
    change: Change
    result: ClaimResult | None  # None: no run to judge, or the form was not rebuilt


def judge_history(target: str, measured: Measured | None) -> list[PastVerdict]:
    """Each change of target's check with the verdict its previous form gives on measured
    (today's run of the target's scenario)."""
    out = []
    for change in HISTORY[target]:
        if change.previous is None or measured is None:
            out.append(PastVerdict(change, None))
            continue
        form = claims.Claim(f"before {change.commit}", change.commit, change.previous)
        out.append(PastVerdict(change, evaluate_claim(form, measured, None)))
    return out
