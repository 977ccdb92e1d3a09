"""Each reproduction target's shape checks, written from its paper (the claim's source).

A claim compares medians over valid repetitions (harness.reproduce.verdict.Measured) with
a bound chosen for the shape, not the paper's magnitude: 1998-2004 hardware cannot match,
so "select loses 44 %" becomes "select loses at least 25 %". A ratio of two points of a
sweep is the median of their ratios within each round (Measured.round_ratios), and the
rounds' spread is printed beside it, with how many rounds fell beyond the bound when some
did. Each bound's reason is in its claim text, where `wanbench reproduce --check` prints it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from clients.validity import KEEP_UP_FRACTION
from harness.analysis import derive
from harness.reproduce.verdict import Claim, Measured, Outcome, Unmeasured

Test = Callable[[Measured], Outcome]


def _label(combo: dict) -> str:
    """A point's coordinates as the numbers name them: "dispatch=select, cold_conns=2000"."""
    return ", ".join(f"{k}={v}" for k, v in combo.items())


def _fmt(value: float) -> str:
    return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"


def _ends(m: Measured, column: str, **where: object) -> tuple[object, object]:
    """The sweep's lowest and highest level of column: the claim is about those, so an
    invalid end fails it (Measured.median says why) rather than moving inwards."""
    levels = m.levels(column, recorded=True, **where)
    if len(levels) < 2:
        raise Unmeasured(f"{column}: one level only ({levels}) where {where or 'anywhere'}")
    return levels[0], levels[-1]


def ratio_across(metric: str, column: str, low: float | None = None, high: float | None = None,
                 each: tuple[str, ...] = (), **where: object) -> Test:
    """metric at column's highest valid level / at its lowest, for every combination of
    `each` (and the fixed `where`); passes when every ratio is within [low, high]."""

    def inside(value: Any) -> Any:
        """A ratio (or each round's) within [low, high]."""
        return (low is None or value >= low) & (high is None or value <= high)

    def test(m: Measured) -> Outcome:
        parts, passed = [], True
        for combo in _combinations(m, each, where):
            first, last = _ends(m, column, **combo)
            ratios = m.round_ratios(metric, {**combo, column: last}, {**combo, column: first})
            ratio = float(ratios.median())
            ok = bool(inside(ratio))
            passed &= ok
            label = _label(combo)
            parts.append(f"{label + ': ' if label else ''}{metric} at {column}={last} / at "
                         f"{first} = {ratio:.3g}{_spread(ratios, inside(ratios))}"
                         f"{'' if ok else ' ✗'}")
        return Outcome(passed, "; ".join(parts))

    return test


def _spread(ratios: pd.Series, within: pd.Series) -> str:
    """The rounds' ratios behind a median: their range, and how many were beyond the bound
    when some were (a verdict the rounds do not all share)."""
    if len(ratios) < 2:
        return " (1 round)"
    beyond = int((~within).sum())
    return (f" (rounds {ratios.min():.3g}-{ratios.max():.3g}"
            f"{f', {beyond} of {len(ratios)} beyond the bound' if beyond else ''})")


def _combinations(m: Measured, each: tuple[str, ...], where: dict) -> list[dict]:
    if not each:
        return [dict(where)]
    frame = m.rows(valid=False, **where)  # every combination swept: an all-invalid one fails
    missing = [c for c in each if c not in frame.columns]
    if missing or frame.empty:
        raise Unmeasured(f"no points with {', '.join(each)} where {where or 'anywhere'}")
    keys = frame[list(each)].drop_duplicates().sort_values(list(each))
    return [{**where, **dict(zip(each, row, strict=True))} for row in keys.itertuples(index=False)]


def peak_ratio(column: str, numerator: object, denominator: object, low: float,
               each: tuple[str, ...] = (), **where: object) -> Test:
    """One series' peak reply rate (the highest median over offered rates) / another's."""

    def peak(m: Measured, combo: dict, series: object) -> float:
        at = {**combo, column: series}
        return max(m.median("reply_rate_rps", **at, offered_rate_rps=rate)
                   for rate in m.levels("offered_rate_rps", **at))

    def test(m: Measured) -> Outcome:
        parts, passed = [], True
        for combo in _combinations(m, each, where):
            top, bottom = peak(m, combo, numerator), peak(m, combo, denominator)
            ratio = top / bottom
            ok = ratio >= low
            passed &= ok
            label = _label(combo)
            parts.append(f"{label}: peak {numerator} {_fmt(top)} / {denominator} "
                         f"{_fmt(bottom)} = {ratio:.3g}{'' if ok else ' ✗'}")
        return Outcome(passed, "; ".join(parts))

    return test


def below_both_knees(metric: str, column: str, numerator: object, denominator: object,
                     high: float) -> Test:
    """At every offered rate both series kept up with, metric of one / the other's ≤ high."""

    def kept_up(m: Measured, series: object) -> set:
        return {rate for rate in m.levels("offered_rate_rps", **{column: series})
                if _kept_up(m, rate, **{column: series})}

    def test(m: Measured) -> Outcome:
        rates = sorted(kept_up(m, numerator) & kept_up(m, denominator))
        if not rates:
            raise Unmeasured(f"no offered rate that both {numerator} and {denominator} kept up "
                             "with")
        ratios = [m.median(metric, **{column: numerator}, offered_rate_rps=r)
                  / m.median(metric, **{column: denominator}, offered_rate_rps=r) for r in rates]
        passed = max(ratios) <= high
        return Outcome(passed, f"{numerator}/{denominator} {metric} at "
                               + ", ".join(f"{_fmt(r)}: {q:.3g}" for r, q in
                                           zip(rates, ratios, strict=True))
                               + ("" if passed else " ✗"))

    return test


def server_bound_at_saturation(each: tuple[str, ...], **where: object) -> Test:
    """Every curve's saturation point (its highest offered rate) had the server saturated
    (clients.validity.server_saturated: its CPU or budget used up, replies behind the
    offered rate), the generator valid."""

    def test(m: Measured) -> Outcome:
        parts, passed = [], True
        for combo in _combinations(m, each, where):
            top = max(m.levels("offered_rate_rps", recorded=True, **combo))
            rows = m.rows(**combo, offered_rate_rps=top)
            if rows.empty:
                m.median("reply_rate_rps", **combo, offered_rate_rps=top)  # raises: why
            saturated = rows["server_saturated"].astype("boolean").fillna(False)
            cpu = pd.to_numeric(rows["cpu_server_pct"], errors="coerce").median()
            ok = bool(saturated.all())
            passed &= ok
            label = _label(combo)
            parts.append(f"{label}: at {_fmt(top)} offered, server {cpu:.0f} % CPU, "
                         f"{int(saturated.sum())}/{len(rows)} saturated{'' if ok else ' ✗'}")
        return Outcome(passed, "; ".join(parts))

    return test


def _kept_up(m: Measured, rate: float, **where: object) -> bool:
    return m.median("reply_rate_rps", **where, offered_rate_rps=rate) >= KEEP_UP_FRACTION * rate


def _knee(m: Measured, **where: object) -> float:
    """The highest offered rate the server kept up with (its valid median reply rate ≥
    KEEP_UP_FRACTION of it); 0 when it kept up with none."""
    kept = [rate for rate in m.levels("offered_rate_rps", **where) if _kept_up(m, rate, **where)]
    return max(kept, default=0.0)


def knee_order(column: str, later: object, earlier: object, each: tuple[str, ...] = ()) -> Test:
    """`later` keeps up with offered rates at least as high as `earlier` does, and at least
    one of them falls behind somewhere in the sweep (else the sweep never reached a knee)."""

    def test(m: Measured) -> Outcome:
        parts, passed = [], True
        for combo in _combinations(m, each, {}):
            top = max(m.levels("offered_rate_rps", recorded=True, **combo))
            late, early = (_knee(m, **combo, **{column: s}) for s in (later, earlier))
            ok = late >= early and min(late, early) < top
            passed &= ok
            label = _label(combo)
            parts.append(f"{label + ': ' if label else ''}kept up to {later} {_fmt(late)}, "
                         f"{earlier} {_fmt(early)} of ≤ {_fmt(top)} req/s"
                         f"{'' if ok else ' ✗'}")
        return Outcome(passed, "; ".join(parts))

    return test


EXHAUSTED_IDLE_PCT = 2.0  # both benchmarks used all of their CPU (or budget): nothing to tell


def idle_lower(column: str, more_idle: object, less_idle: object,
               each: tuple[str, ...]) -> Test:
    """At every offered rate both series kept up with, CPU idle is lower for `less_idle`
    (e.g. with cold connections, or the unmodified kernel) than for `more_idle`, unless both
    had none left; and by at least 10 points somewhere."""

    def test(m: Measured) -> Outcome:
        parts, passed = [], True
        for combo in _combinations(m, each, {}):
            more, less = ({**combo, column: series} for series in (more_idle, less_idle))
            common = set(m.levels("offered_rate_rps", **more)) & set(
                m.levels("offered_rate_rps", **less))
            rates = sorted(r for r in common if _kept_up(m, r, **more) and _kept_up(m, r, **less))
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
            label = _label(combo)
            parts.append(f"{label + ': ' if label else ''}idle at {column} {more_idle} / "
                         f"{less_idle}, at "
                         + ", ".join(f"{_fmt(r)}: {a:.0f}/{b:.0f} %" for r, (a, b) in
                                     zip(rates, idle, strict=True))
                         + ("" if ok else " ✗"))
        return Outcome(passed, "; ".join(parts))

    return test


def among(test: Test, **where: object) -> Test:
    """test on one series of several (e.g. the unmodified kernel's curves only)."""
    return lambda m: test(m.only(**where))


def idle_regression(each: tuple[str, ...]) -> Test:
    """CPU idle falls linearly with request rate (r ≤ -0.9, the papers' |r| ≥ 0.92; the line
    fitted within rounds, derive.regressions), and the capacity it predicts (idle = 0) is
    lower with cold connections."""

    def test(m: Measured) -> Outcome:
        fits = derive.regressions(m.valid, "request_rate_rps", ["server_idle_pct"],
                                  [*each, "cold_conns"])
        if fits.empty:
            raise Unmeasured("fewer than 3 valid points below saturation per curve")
        swept = m.levels("cold_conns", recorded=True)
        parts, passed = [], True
        for key, group in fits.groupby(list(each)) if each else [((), fits)]:
            group = group.sort_values("cold_conns")
            key = key if isinstance(key, tuple) else (key,)
            label = _label(dict(zip(each, key, strict=True)))
            unfitted = sorted(int(c) for c in set(swept) - set(group["cold_conns"]))
            if unfitted:
                raise Unmeasured(f"{label}: no line at cold_conns {unfitted}: fewer than 3 "
                                 "valid points below saturation")
            linear = bool((group["r"] <= -0.9).all())
            capacities = group["x_intercept"].tolist()
            falls = capacities[-1] < capacities[0]
            passed &= linear and falls
            rs = ", ".join(f"{r:.2f}" for r in group["r"])
            caps = " → ".join(_fmt(c) for c in capacities)
            parts.append(f"{label}: r {rs}{'' if linear else ' ✗'}; capacity {caps} req/s "
                         f"over cold {group['cold_conns'].tolist()}{'' if falls else ' ✗'}")
        return Outcome(passed, "; ".join(parts))

    return test


def overflow_regimes(m: Measured) -> Outcome:
    """CM01 Table 1: no SIGIO overflow below saturation (the server kept up with CPU to
    spare), overflows past it. A point at the knee, kept up but with all its CPU in use, is
    in neither. Points past saturation count even when invalid (a generator falling behind
    there too does not change the server's own counters; figures.py keep_invalid says so)."""
    points = m.all[(m.all.get("dispatch") == "rtsig")]
    if points.empty or "sigio_overflows" not in points:
        raise Unmeasured("no rtsig points with SIGIO counters")
    busy = points["server_busy"].fillna(False).astype(bool)
    kept_up = points[(points["reply_ratio"] >= KEEP_UP_FRACTION) & ~busy]
    behind = points[(points["reply_ratio"] < KEEP_UP_FRACTION)
                    & points["server_saturated"].astype("boolean").fillna(False)]
    if kept_up.empty or behind.empty:
        raise Unmeasured(f"{len(kept_up)} records kept up, {len(behind)} were past a saturated "
                         "server's capacity: both regimes are needed")
    below = (kept_up["sigio_overflows"] / kept_up["signals_dequeued"].clip(lower=1)).max()
    above = int(behind["sigio_overflows"].min())
    passed = below <= 0.001 and above > 0
    return Outcome(passed, f"below saturation ({len(kept_up)} records): overflows ≤ "
                           f"{100 * below:.3f} % "
                           f"of dequeues; past saturation ({len(behind)}): ≥ {above} overflows")


def _multi_accept_vs_rtsig(m: Measured) -> Outcome:
    """CM01 series are (dispatch, accept) pairs: multi-accept select against RT signals."""
    mechanisms = m.with_column("mechanism", lambda f: f["dispatch"] + "/" + f["accept"])
    return peak_ratio("mechanism", "select/multi", "rtsig/multi", low=0.9,
                      each=("cold_conns", "reply_bytes"))(mechanisms)


# In-kernel cost (kernel_trace: wb-ktrace's columns and derive's kernel_* metrics): where the
# papers measured the kernel from inside (DCPI, the timestamp register), measured from inside.


def _steps(m: Measured, metric: str, column: str, combo: dict,
           from_level: object = None) -> list[tuple[object, object, pd.Series]]:
    """Each step of the curve (a level and the next, from `from_level` on) with metric's
    ratio across it within each round: every point of the curve, not its ends."""
    levels = [level for level in m.levels(column, recorded=True, **combo)
              if from_level is None or level >= from_level]
    if len(levels) < 2:
        raise Unmeasured(f"{column}: one level only ({levels}) where {combo or 'anywhere'}")
    return [(low, high, m.round_ratios(metric, {**combo, column: high}, {**combo, column: low}))
            for low, high in zip(levels, levels[1:], strict=False)]


def grows_at_every_step(metric: str, column: str, low: float, each: tuple[str, ...] = (),
                        from_level: object = None, **where: object) -> Test:
    """metric rises at every step of column (from from_level on; a tie is no rise), and from
    the lowest level to the highest by ≥ low×; per combination of `each`."""

    def test(m: Measured) -> Outcome:
        parts, passed = [], True
        for combo in _combinations(m, each, where):
            steps = [(a, b, float(r.median())) for a, b, r in
                     _steps(m, metric, column, combo, from_level)]
            ends = _ends(m, column, **combo)
            whole = m.round_ratios(metric, {**combo, column: ends[1]}, {**combo, column: ends[0]})
            total = float(whole.median())
            rising = all(r > 1 for _, _, r in steps)
            ok = rising and total >= low
            passed &= ok
            label = _label(combo)
            parts.append(f"{label + ': ' if label else ''}{metric} steps "
                         + ", ".join(f"{a}→{b} ×{r:.3g}{'' if r > 1 else ' ✗'}"
                                     for a, b, r in steps)
                         + f"; {ends[1]} / {ends[0]} = {total:.3g}"
                         + f"{_spread(whole, whole >= low)}{'' if total >= low else ' ✗'}")
        return Outcome(passed, "; ".join(parts))

    return test


def flattens(metric: str, column: str, each: tuple[str, ...] = ()) -> Test:
    """Each increase of metric along column is smaller than the one before (the curve bends
    over), medians over valid repetitions; per combination of `each`."""

    def test(m: Measured) -> Outcome:
        parts, passed = [], True
        for combo in _combinations(m, each, {}):
            levels = m.levels(column, recorded=True, **combo)
            if len(levels) < 3:
                raise Unmeasured(f"{column}: {len(levels)} levels, a bend needs 3 ({combo})")
            values = [m.median(metric, **combo, **{column: level}) for level in levels]
            rises = [b - a for a, b in zip(values, values[1:], strict=False)]
            ok = all(later < earlier for earlier, later in zip(rises, rises[1:], strict=False))
            passed &= ok
            parts.append(f"{_label(combo)}: {metric} "
                         + " → ".join(f"{_fmt(v)} at {level}" for v, level in
                                      zip(values, levels, strict=True))
                         + f" (rises {', '.join(_fmt(r) for r in rises)}){'' if ok else ' ✗'}")
        return Outcome(passed, "; ".join(parts))

    return test


def every_level_within(metric: str, column: str, low: float, high: float) -> Test:
    """metric at every level of column / at its lowest level within [low, high], each ratio
    taken within rounds (a flat curve: every point of it)."""

    def test(m: Measured) -> Outcome:
        levels = m.levels(column, recorded=True)
        if len(levels) < 2:
            raise Unmeasured(f"{column}: one level only ({levels}): a flat curve needs two")
        parts, passed = [], True
        for level in levels[1:]:
            ratios = m.round_ratios(metric, {column: level}, {column: levels[0]})
            ratio = float(ratios.median())
            ok = low <= ratio <= high
            passed &= ok
            parts.append(f"{level} / {levels[0]}: {ratio:.3g}"
                         f"{_spread(ratios, (ratios >= low) & (ratios <= high))}"
                         f"{'' if ok else ' ✗'}")
        return Outcome(passed, f"{metric} along {column}: " + "; ".join(parts))

    return test


def at_least(metric: str, bound: float, **where: object) -> Test:
    """metric's median over valid repetitions at one point ≥ bound."""

    def test(m: Measured) -> Outcome:
        value = m.median(metric, **where)
        ok = value >= bound
        at = _label(where)
        return Outcome(ok, f"{at + ': ' if at else ''}{metric} {_fmt(value)}{'' if ok else ' ✗'} "
                           f"(≥ {_fmt(bound)})")

    return test


def at_most_share(part: str, whole: str, high_pct: float) -> Test:
    """part / whole (two metrics of each record), median over valid repetitions, ≤ high_pct."""

    def test(m: Measured) -> Outcome:
        shares = m.with_column("share", lambda f: 100 * f[part] / f[whole]).values("share")
        share = float(shares.median())
        ok = share <= high_pct
        return Outcome(ok, f"{part} / {whole} = {share:.3g} %{'' if ok else ' ✗'} "
                           f"(≤ {high_pct:g} %; {len(shares)} repetitions, "
                           f"{shares.min():.3g}-{shares.max():.3g} %)")

    return test


def dispatch_shares(select_over_epoll: float) -> Test:
    """Each dispatch call's in-kernel share of its server's CPU (derive's
    kernel_dispatch_share_pct), both measured, and select's / epoll's within each round ≥
    select_over_epoll."""

    def test(m: Measured) -> Outcome:
        share = "kernel_dispatch_share_pct"
        select, epoll = (m.median(share, dispatch=d) for d in ("select", "epoll"))
        ratios = m.round_ratios(share, {"dispatch": "select"}, {"dispatch": "epoll"})
        ratio = float(ratios.median())
        ok = ratio >= select_over_epoll
        return Outcome(ok, f"dispatch call's share of the server's CPU: select {select:.3g} %, "
                           f"epoll {epoll:.3g} %; select / epoll = {ratio:.3g}"
                           f"{_spread(ratios, ratios >= select_over_epoll)}{'' if ok else ' ✗'}")

    return test


def within_the_servers_cpu(test: Test) -> Test:
    """test on the dispatch call's share of the server's CPU, once no valid record has it over
    100 %: the call's in-kernel time (wb-ktrace's clock) beyond the server's whole CPU time
    (schedstat's) is a disagreement of the two clocks, not a share (seen in records whose
    server waited for its CPU most of the window)."""

    def checked(m: Measured) -> Outcome:
        shares = m.valid["kernel_dispatch_share_pct"]  # derived for every record
        if (over := shares[shares > 100]).size:
            raise Unmeasured(f"the dispatch call's in-kernel time exceeds the server's CPU time "
                             f"in {over.size} valid record(s) (up to {over.max():.3g} %)")
        return test(m)

    return checked


def not_at_function_grain(function: str) -> Test:
    """A claim about one kernel function: wb-ktrace times system calls and softirqs only."""

    def test(m: Measured) -> Outcome:
        raise Unmeasured(f"{function}: wb-ktrace times system calls and softirqs, not kernel "
                         "functions")

    return test


def _claim(text: str, source: str, test: Test, needs: str | None = None, *, quote: str = "",
           bound: str = "") -> Claim:
    return Claim(text, source, test, needs, quote, bound)


CLAIMS: dict[str, tuple[Claim, ...]] = {
    "bm98-fig1": (
        _claim("select's in-kernel share of the server's CPU rises with cold connections at "
               "every step, and at 2000 cold is ≥ 2× its share at 0, each hot count",
               "BM98 §3, Fig. 1",
               within_the_servers_cpu(grows_at_every_step(
                   "kernel_dispatch_share_pct", "cold_conns", low=2.0, each=("hot_conns",))),
               needs="kernel_trace",
               quote="Figure 1 shows that the costs of both the kernel select() implementation "
                     "and the user-mode select() loop rise significantly with increasing "
                     "numbers of cold connections. [...] up to 53% of the system's CPU time is "
                     "being spent inside select()",
               bound="the paper gives words ('rise significantly'); the 2× from 0 to 2000 cold "
                     "is this target's bound since its first check (then on the whole CPU), "
                     "now on the dispatch call's in-kernel time over the server's CPU time "
                     "(derive.kernel_dispatch_share_pct), written before a traced run"),
        _claim("select's in-kernel share flattens: each rise along cold connections is smaller "
               "than the one before, each hot count", "BM98 §3, Fig. 1",
               within_the_servers_cpu(flattens("kernel_dispatch_share_pct", "cold_conns",
                                               each=("hot_conns",))),
               needs="kernel_trace",
               quote="The costs are initially linear in the number of cold connections, but "
                     "eventually they flatten out.",
               bound="the paper's words restated as a bend (the rise 1000→2000 smaller than "
                     "0→1000), no tolerance; written before a traced run"),
    ),
    "bm98-table1-2": (
        _claim("select's in-kernel time is ≥ 10 % of the server's CPU at 750 cold, 50 hot, "
               "220 req/s", "BM98 Table 1",
               within_the_servers_cpu(at_least("kernel_dispatch_share_pct", 10.0)),
               needs="kernel_trace",
               quote="21.91% all kernel select functions (Table 1: 750 cold connections, 50 "
                     "hot connections, 220 requests/second)",
               bound="the paper's 21.9 % with a tolerance of half; the form of this check "
                     "before 9169b16 ('≥ 10 % of the CPU'), which a run's 6.0 % and 4.8 % had "
                     "failed; now the dispatch call's in-kernel time over the server's CPU "
                     "time, as the paper's machine had no idle time to count"),
        _claim("ufalloc (Linux's alloc_fd) takes a share of the server's CPU",
               "BM98 Table 1", not_at_function_grain("alloc_fd"), needs="function_grain",
               quote="17.79% ufalloc() kernel",
               bound="none: alloc_fd is one function inside accept, timed only at function "
                     "grain (fentry)"),
    ),
    "bm98-fig3-5": (
        _claim("750 cold connections lower select's saturation point: the naive benchmark "
               "keeps up with at least the realistic one's rates, and one falls behind in the "
               "sweep", "BM98 §5.1, Figs. 3 and 5 ('drastically reduce')",
               among(knee_order("cold_conns", 0, 750, each=("reply_bytes",)),
                     dispatch="select")),
        _claim("each select curve's last point is server-bound",
               "BM98 §5.1 (last point = saturation)",
               among(server_bound_at_saturation(("reply_bytes", "cold_conns")),
                     dispatch="select")),
        _claim("the modified kernel (epoll in its place) at 750 cold keeps up with rates at "
               "least as high as the unmodified one, each reply size",
               "BM98 §5.1, Figs. 3 and 5 ('higher saturation request rate')",
               among(knee_order("dispatch", "epoll", "select", each=("reply_bytes",)),
                     cold_conns=750)),
    ),
    "bm98-fig4-6": (
        _claim("CPU idle is lower with 750 cold connections at every rate both kept up with "
               "(unless neither had any left), by ≥ 10 points somewhere",
               "BM98 §5.1, Figs. 4 and 6",
               among(idle_lower("cold_conns", 0, 750, ("reply_bytes",)), dispatch="select")),
        _claim("at 750 cold, the modified kernel (epoll) leaves more CPU idle than the "
               "unmodified one at every rate both kept up with, by ≥ 10 points somewhere",
               "BM98 §5.1, Figs. 4 and 6; §5.3 (16 % vs 88 % idle at 100 req/s)",
               among(idle_lower("dispatch", "epoll", "select", ("reply_bytes",)),
                     cold_conns=750)),
    ),
    "bm98-fig9": (
        _claim("select's saturation throughput at 2000 cold ≤ 0.75× at 0 cold",
               "BM98 §5.2, Fig. 9 (unmodified kernel: −44 %)",
               ratio_across("reply_rate_rps", "cold_conns", high=0.75, dispatch="select")),
        _claim("the modified kernel's (epoll's) saturation throughput at 2000 cold ≥ 0.8× at "
               "0 cold", "BM98 §5.2, Fig. 9 (new select() and ufalloc(): −14 %)",
               ratio_across("reply_rate_rps", "cold_conns", low=0.8, dispatch="epoll")),
    ),
    "bm98-tables-4-5": (
        _claim("CPU idle falls linearly with request rate (r ≤ −0.9, fitted within rounds), "
               "and the capacity it predicts is lower with 750 cold connections",
               "BM98 §6.2, Tables 4, 5, 9, 15 (|r| ≥ 0.92)",
               among(idle_regression(("reply_bytes",)), dispatch="select")),
    ),
    "bm98-ufalloc": (
        _claim("the OLD kernel's linear descriptor search: accept's in-kernel ns per call "
               "rises at every step of open descriptors, ≥ 2× from the fewest to the most, "
               "each dispatch (today's Linux allocates from a two-level bitmap, like the "
               "paper's new ufalloc: a FAIL says this kernel does not have the old cost)",
               "BM98 §2.3, §4.2",
               grows_at_every_step("kernel_accept_ns_per_call", "cold_conns", low=2.0,
                                   each=("dispatch",)), needs="kernel_trace",
               quote="all of the UNIX variants that we know of [...] use a linear search of "
                     "the file descriptor table. [...] The cost of this search is roughly "
                     "proportional to the number of open file descriptors",
               bound="'roughly proportional' restated as a rise at every step and ≥ 2× over "
                     "~30 to 15,000 open descriptors (a linear search would give hundreds×; "
                     "accept's fixed cost is beside it), written before a traced run"),
    ),
    "bmd99-fig8": (
        _claim("select's reply rate at 2000 cold ≤ 0.75× its rate at 0 cold",
               "BMD99 Fig. 8 ('select() does not [perform independently of the number of cold "
               "connections]'; the text gives no number: the bound of BM98 Fig. 9, the same "
               "measure)",
               ratio_across("reply_rate_rps", "cold_conns", high=0.75, dispatch="select")),
        _claim("epoll's reply rate at 2000 cold ≥ 0.9× its rate at 0 cold",
               "BMD99 Fig. 8 (new API independent of cold connections)",
               ratio_across("reply_rate_rps", "cold_conns", low=0.9, dispatch="epoll")),
    ),
    "bmd99-fig9": (
        _claim("the event API keeps up with rates at least as high as select, and one of them "
               "falls behind in the sweep", "BMD99 Fig. 9 (1348 vs 1291 req/s)",
               knee_order("dispatch", "epoll", "select")),
        _claim("at every rate both kept up with, epoll's mean response time ≤ 0.5× select's",
               "BMD99 Fig. 9 ('much lower latency')",
               below_both_knees("resp_time_mean_ms", "dispatch", "epoll", "select", high=0.5)),
    ),
    "bmd99-table2": (
        _claim("the dispatch call's in-kernel share of the server's CPU, each measured: "
               "select's ≥ 34× epoll's", "BMD99 Table 2",
               within_the_servers_cpu(dispatch_shares(select_over_epoll=34.0)),
               needs="kernel_trace",
               quote="While the classical select() implementation consumes 34% of the CPU, "
                     "and our improved select() implementation consumes 12%, the new API "
                     "consumes less than 1% of the CPU.",
               bound="the paper's own numbers: 34 % against less than 1 % is at least 34×; no "
                     "floor under epoll's share (both are in-kernel times, measured exactly)"),
    ),
    "cm01-fig3-5": (
        _claim("rtsig's server CPU is flat with connections: most / fewest ≤ 1.5, each rate",
               "CM01 §3.1.2, Fig. 4 (6.67 % at 500 req/s, 13.25 % at 1000)",
               ratio_across("cpu_server_pct", "total_conns", high=1.5, dispatch="rtsig",
                            each=("offered_rate_rps",))),
        _claim("rtsig's mean response time is flat with connections: most / fewest ≤ 2, each rate",
               "CM01 §3.1.2, Fig. 5 (≈ 0.3 ms)",
               ratio_across("resp_time_mean_ms", "total_conns", high=2.0, dispatch="rtsig",
                            each=("offered_rate_rps",))),
        _claim("select's server CPU grows with connections: most / fewest ≥ 2, each rate",
               "CM01 §3.1.2, Fig. 4",
               ratio_across("cpu_server_pct", "total_conns", low=2.0, dispatch="select",
                            each=("offered_rate_rps",))),
        _claim("/dev/poll's server CPU grows with connections", "CM01 §3.1.2, Fig. 4",
               lambda m: Outcome(False, "unreachable"), needs="dev_poll"),
    ),
    "cm01-fig6-9": (
        _claim("multi-accept select's peak reply rate ≥ 0.9× rtsig's, each idle count and size",
               "CM01 §4.1, Figs. 6-8 ('similar to the RT signals')",
               lambda m: _multi_accept_vs_rtsig(m)),
        _claim("the sweep drives rtsig past saturation, server-bound, each idle count and size",
               "CM01 §4.2 (rtsig saturated at about 3200 req/s)",
               server_bound_at_saturation(("cold_conns", "reply_bytes", "accept"),
                                          dispatch="rtsig")),
        _claim("RT signals with signal-per-fd", "CM01 §4, Figs. 6-9",
               lambda m: Outcome(False, "unreachable"), needs="signal_per_fd"),
    ),
    "cm01-table1": (
        _claim("no SIGIO overflow below saturation (rtsig kept up with CPU to spare); overflows "
               "at every point past saturation",
               "CM01 §4.2, Table 1", overflow_regimes),
    ),
    "cpp-fig4": (
        _claim("the stack's in-kernel time per packet flat with one connection's bandwidth: "
               "every bandwidth within 1.18× of the lowest, either way",
               "cpp §5.1, Fig. 4",
               every_level_within("kernel_stack_ns_per_packet", "stream_mbps", low=1 / 1.18,
                                  high=1.18), needs="kernel_trace",
               quote="as the bandwidth is increased to 900 Mb/s, close to the line rate of the "
                     "network, the cycle count per packet of the network stack increases from "
                     "4080 to 4833 (by 18%). [...] a connection's bandwidth does not appear to "
                     "have a significant impact on the network stack's performance.",
               bound="the paper's largest change, +18 % at line rate, as the tolerance either "
                     "way at every point (this sweep stays far below line rate); cycles as "
                     "in-kernel ns (a constant TSC factor)"),
        _claim("instructions per packet flat with bandwidth: highest / lowest ≤ 1.1",
               "cpp §5.1, Fig. 4 (TCP +5 %)",
               ratio_across("instructions_per_packet", "stream_mbps", high=1.1),
               needs="hardware_counters",
               quote="The TCP layer's instruction count increases from 1286 to 1356 (by 5%)",
               bound="the paper's +5 % with a tolerance of 5 points"),
    ),
    "cpp-fig5": (
        _claim("the stack's in-kernel time per packet rises with connections at constant "
               "bandwidth at every step from 128 on, and 2048 / 4 ≥ 1.35",
               "cpp §5.2, Fig. 5; Table 1",
               grows_at_every_step("kernel_stack_ns_per_packet", "stream_conns", low=1.35,
                                   from_level=128), needs="kernel_trace",
               quote="as the number of connections increases, the cycles per packet of the "
                     "System Call and TCP layers increase dramatically above about 128 "
                     "connections (Table 1, WC, L:0: Overall Stack 7720 cycles at C:4, 10400 "
                     "at C:2048)",
               bound="the paper's Overall Stack 10400 / 7720 = 1.35 from 4 to 2048 "
                     "connections, no tolerance; a rise at every step past 128 from its "
                     "words; cycles as in-kernel ns (a constant TSC factor)"),
        _claim("the system-call layer's in-kernel time per packet: 2048 / 4 connections ≥ 3.5 "
               "(here the receiver's read, TCP's copy to the user inside it; the paper's is "
               "the sender's)", "cpp §5.2, Fig. 5",
               ratio_across("kernel_syscall_ns_per_packet", "stream_conns", low=3.5),
               needs="kernel_trace",
               quote="This results in an 157% increase in cycles per packet in the TCP layer "
                     "and a 250% increase in cycles per packet in the System Call layer.",
               bound="the paper's +250 % (3.5×), no tolerance"),
        _claim("instructions per packet flat with connections: 2048 / 4 ≤ 1.15",
               "cpp §5.2, Fig. 5 (TCP +10 %)",
               ratio_across("instructions_per_packet", "stream_conns", high=1.15),
               needs="hardware_counters",
               quote="The TCP layer's instruction count increases slightly from 1170 to 1297 "
                     "(by 10%)", bound="the paper's +10 % with a tolerance of 5 points"),
    ),
    "cpp-fig6": (
        _claim("the receive softirq's in-kernel time per packet (IP and TCP's receive) at 40 "
               "ms one-way ≥ 1.8× at 0 ms, 2048 connections",
               "cpp §5.3, Fig. 6",
               ratio_across("kernel_rx_ns_per_packet", "one_way_delay_ms", low=1.8),
               needs="kernel_trace",
               quote="Over this interval, the cycle count of TCP almost doubles. The cycles "
                     "per packet of the rest of the network stack remains fairly constant",
               bound="'almost doubles' restated as ≥ 1.8×, written before a traced run; TCP "
                     "is most of the receive softirq (Table 1: TCP 3743 of TCP + IP 4433 "
                     "cycles at C:2048)"),
        _claim("the system-call layer's in-kernel time per packet stays within 1.2× of 0 ms' "
               "at every latency", "cpp §5.3, Fig. 6",
               every_level_within("kernel_syscall_ns_per_packet", "one_way_delay_ms",
                                  low=1 / 1.2, high=1.2), needs="kernel_trace",
               quote="The cycles per packet of the rest of the network stack remains fairly "
                     "constant as network latency is increased.",
               bound="'fairly constant' restated as within 1.2× either way at every point, "
                     "written before a traced run"),
        _claim("instructions per packet constant with latency: 40 ms / 0 ms ≤ 1.1",
               "cpp §5.3, Fig. 6",
               ratio_across("instructions_per_packet", "one_way_delay_ms", high=1.1),
               needs="hardware_counters",
               quote="the number of instructions executed per packet across the network stack "
                     "remains constant, except Driver",
               bound="'constant' restated as ≤ 1.1"),
    ),
    "cpp-fig2": (
        _claim("content throughput rises with connections at 0 ms: most / fewest ≥ 1.5",
               "cpp §4, Fig. 2 ('first increases rapidly')",
               ratio_across("content_throughput_mbps", "client_conns", low=1.5,
                            one_way_delay_ms=0)),
    ),
    "cpp-fig3": (
        _claim("content throughput falls as latency grows, at the most connections: "
               "40 ms / 0 ms ≤ 0.9", "cpp §4, Fig. 3",
               lambda m: ratio_across("content_throughput_mbps", "one_way_delay_ms", high=0.9,
                                      client_conns=max(m.levels("client_conns", True)))(m),
               needs="emulated_link_at_load"),
    ),
    "cpp-table1": (
        _claim("the system-call layer is at most 20 % of the stack's in-kernel time per packet "
               "(here the receiver's read, the paper's the sender's write)", "cpp Table 1",
               at_most_share("kernel_syscall_ns_per_packet", "kernel_stack_ns_per_packet",
                             20.0), needs="kernel_trace",
               quote="(C:4) Cycles 1582 1526 2509 571 1049 2064 3812 7720 [User, System Call, "
                     "TCP, IP, Ethernet, Driver, Other, Overall Stack]; System Call 1526 to "
                     "2005 of 7720 to 10402 in every row",
               bound="the paper's largest System Call share of the Overall Stack, 1526 / 7720 "
                     "= 19.8 % (C:4, L:0), rounded to 20 %; cycles as in-kernel ns"),
        _claim("per-layer instructions per packet from hardware counters",
               "cpp Table 1", lambda m: Outcome(False, "unreachable"),
               needs="hardware_counters",
               quote="Instructions 574 499 1372 380 411 530 153 3292 (C:4, L:0)",
               bound="none: instructions need counters"),
    ),
}
