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


def stack_ratio_across(column: str, low: float) -> Test:
    """ratio_across on the network stack's cycles per packet (derive.stack_cycles_per_packet:
    the paper's "Overall Stack", by each layer's share of the profile), not the CPU's."""

    def test(m: Measured) -> Outcome:
        if m.profiles.empty:
            raise Unmeasured("no profiles.parquet in the run")
        stack = m.with_column("stack_cycles_per_packet",
                              lambda f: derive.stack_cycles_per_packet(f, m.profiles))
        return ratio_across("stack_cycles_per_packet", column, low=low)(stack)

    return test


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


def _claim(text: str, source: str, test: Test, needs: str | None = None, *, quote: str = "",
           bound: str = "") -> Claim:
    return Claim(text, source, test, needs, quote, bound)


CLAIMS: dict[str, tuple[Claim, ...]] = {
    "bm98-fig1": (
        _claim("server CPU rises with cold connections: at 2000 cold ≥ 2× at 0, each hot count",
               "BM98 §3, Fig. 1 (kernel select up to 53 % of CPU)",
               ratio_across("cpu_server_pct", "cold_conns", low=2.0, each=("hot_conns",))),
    ),
    "bm98-table1-2": (
        _claim("select functions take ≥ 20 % of the server's busy samples at 750 cold, 50 hot",
               "BM98 Table 1 (select and helpers ≈ 22 % of a CPU with none idle)",
               select_share_of_cpu(at_least_pct=20, of_busy=True)),
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
        _claim("epoll server: CPU per accepted connection at the most open descriptors ≤ 1.5× at "
               "the fewest (today's two-level descriptor bitmap; the paper's ufalloc was linear)",
               "BM98 §2.3, §4.2",
               ratio_across("cpu_us_per_conn", "cold_conns", high=1.5, dispatch="epoll")),
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
        _claim("select functions' share of the CPU: select ≥ 10× epoll's",
               "BMD99 Table 2 (34 % vs 0.68 %)", select_share_of_cpu(dispatch_ratio=10)),
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
        _claim("cycles per packet nearly flat with one connection's bandwidth: highest / lowest "
               "within 1.3× either way", "cpp §5.1, Fig. 4 (+18 % only near line rate)",
               ratio_across("cycles_per_packet", "stream_mbps", low=1 / 1.3, high=1.3)),
        _claim("instructions per packet flat with bandwidth: highest / lowest ≤ 1.1",
               "cpp §5.1, Fig. 4 (TCP +5 %)",
               ratio_across("instructions_per_packet", "stream_mbps", high=1.1),
               needs="hardware_counters"),
    ),
    "cpp-fig5": (
        # The paper's cycles are the stack's own (a profiler of its functions); a CPU's busy
        # time also holds the wake-up per packet, which in a guest is most of it, and only a
        # cycles profile (an NMI) splits it by layer
        # (profile.record_argv; measured in REPRODUCTION.md).
        _claim("the network stack's cycles per packet rise with connections at constant "
               "bandwidth: 2048 / 4 ≥ 1.5", "cpp §5.2, Fig. 5 (TCP +157 %, system call +250 %)",
               stack_ratio_across("stream_conns", low=1.5), needs="hardware_counters"),
        _claim("instructions per packet flat with connections: 2048 / 4 ≤ 1.15",
               "cpp §5.2, Fig. 5 (TCP +10 %)",
               ratio_across("instructions_per_packet", "stream_conns", high=1.15),
               needs="hardware_counters"),
    ),
    "cpp-fig6": (
        _claim("the network stack's cycles per packet grow with one-way latency at 2048 "
               "connections: 40 ms / 0 ms ≥ 1.15",
               "cpp §5.3, Fig. 6 (TCP's cycles almost double; other layers flat)",
               stack_ratio_across("one_way_delay_ms", low=1.15), needs="hardware_counters"),
        _claim("instructions per packet constant with latency: 40 ms / 0 ms ≤ 1.1",
               "cpp §5.3, Fig. 6",
               ratio_across("instructions_per_packet", "one_way_delay_ms", high=1.1),
               needs="hardware_counters"),
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
        _claim("per-layer instructions and cycles per packet from hardware counters",
               "cpp Table 1 (stack cycles 7720 → 10400 from 4 to 2048 connections at ≈ 3000 "
               "instructions)", lambda m: Outcome(False, "unreachable"),
               needs="hardware_counters"),
    ),
}
