"""Beyond the papers: what the sweeps none of the papers could make found, read from their runs.

Nothing here is judged against a paper (no PASS or FAIL). Each finding says, from the newest
run of its scenario, where a curve leaves a band around its sweep's lowest level (cpp Fig 5
continued past the last-level cache, BM98 Fig 9 continued to one process's descriptor limit),
or how today's mechanism, io_uring, stands beside epoll on a paper's axis (BMD99 Figs 8-9,
CM01 Figs 3-5). Ratios are within rounds (harness.reproduce.verdict.Measured.round_ratios),
as the checks'.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

from harness.analysis import derive
from harness.reproduce.verdict import Measured, Unmeasured
from harness.results.runset import RunSet

LLC_SCENARIO = "cpp-fig5-beyond-llc"
COLD_SCENARIO = "bm98-fig9-beyond"
URING_COLD_SCENARIO = "bmd99-fig8-beyond-uring"
URING_RATE_SCENARIO = "bmd99-fig9-beyond-uring"
URING_CONNS_SCENARIO = "cm01-fig3-5-beyond-uring"
# Run by `make beyond` (`wanbench reproduce --run --beyond`): not by `make reproduce`,
# whose papers' targets alone fill its budget (harness.reproduce.run)
SCENARIOS = (LLC_SCENARIO, COLD_SCENARIO, URING_COLD_SCENARIO, URING_RATE_SCENARIO,
             URING_CONNS_SCENARIO)

# A curve bends where a level is more than 10 % off its lowest level: the band within which
# the checks hold BMD99's epoll "independent" of cold connections (claims, bmd99-fig8). Two
# series within it of each other at a level are level there, by the same measure.
BAND = 0.10
# wb-server's names (servers/README.md) of today's mechanism and of the one it is read against
URING, EPOLL = "uring", "epoll"
# The findings' names of the papers' axes (the columns harness.analysis.figures plots)
AXES = {"cold_conns": "cold count", "offered_rate_rps": "offered rate [req/s]",
        "total_conns": "connection count"}
# One connection's kernel state at one end, from /proc/slabinfo with 131,072 connections open
# on this machine (cpp-fig5-beyond-llc): the objects that grew by one per socket, TCP (struct
# tcp_sock) 2,368 B, sock_inode_cache 832, dentry 192, filp 192, eventpoll_epi 128,
# lsm_file_cache 24, ep_head 16.
CONN_STATE_BYTES = 2368 + 832 + 192 + 192 + 128 + 24 + 16
MIB = 2**20

# Where a ratio lies against 1 ± band: above it, below it, outside it either way, inside it
Side = Literal["rise", "fall", "either", "within"]
_ON_SIDE: dict[str, Callable[[float, float], bool]] = {
    "rise": lambda ratio, band: ratio > 1 + band,
    "fall": lambda ratio, band: ratio < 1 - band,
    "either": lambda ratio, band: abs(ratio - 1) > band,
    "within": lambda ratio, band: abs(ratio - 1) <= band,
}


@dataclass(frozen=True)
class Ratios:
    """A curve against a reference at each level (the median of the rounds' ratios), the
    levels swept that no round measured validly beside their reference, and the rounds'
    ratios behind each median (where they are known: the reference level has none)."""

    ratios: dict[object, float]
    unmeasured: tuple = ()
    rounds: dict[object, tuple[float, ...]] = field(default_factory=dict)

    @property
    def levels(self) -> list:
        return list(self.ratios)

    def curve(self) -> str:
        shown = ", ".join(f"{_level(level)}: {ratio:.3g}{self._spread(level)}"
                          for level, ratio in self.ratios.items())
        missing = ", ".join(_level(level) for level in self.unmeasured)
        return shown + (f" (no valid point at {missing})" if missing else "")

    def _spread(self, level: object) -> str:
        """The rounds behind a median: two rounds of two may say different things."""
        rounds = self.rounds.get(level, ())
        if len(rounds) == 1:
            return " (1 round)"
        low, high = (f"{r:.3g}" for r in (min(rounds, default=0), max(rounds, default=0)))
        return f" (rounds {low}-{high})" if low != high else ""

    def on_side(self, side: Side, band: float = BAND) -> list:
        """The levels whose ratio (the rounds' median) lies on side of 1 ± band."""
        return [level for level, ratio in self.ratios.items() if _ON_SIDE[side](ratio, band)]

    def every_round(self, side: Side, band: float = BAND) -> list:
        """The levels where every round's ratio lies on side of 1 ± band."""
        return [level for level, rounds in self.rounds.items()
                if rounds and all(_ON_SIDE[side](ratio, band) for ratio in rounds)]


@dataclass(frozen=True)
class Bend(Ratios):
    """A curve against its lowest level: each level's ratio to it, and the first level
    outside 1 ± band in the direction asked (None: none was)."""

    at: object | None = None

    def within_up_to(self) -> object:
        """The highest level before the bend (the highest of all when there is none)."""
        before = [level for level in self.levels if self.at is None or level < self.at]
        return before[-1]


def _level(value: object) -> str:
    """A sweep level as a count: 131,072, not 131072.0."""
    number = float(value)  # type: ignore[arg-type]
    return f"{number:,.0f}" if number.is_integer() else f"{number:,.3g}"


def bend(m: Measured, metric: str, column: str, direction: Side, band: float = BAND,
         **where: object) -> Bend:
    """metric at each level of column over its value at the sweep's lowest, within each round;
    where it first rises above 1 + band (or falls below 1 - band, or either). The lowest level
    is the reference: without a valid point there the curve is unmeasured, not moved up a
    level."""
    first, *rest = m.levels(column, recorded=True, **where)
    ratios, unmeasured, rounds = {first: 1.0}, [], {}
    for level in rest:
        try:
            each = m.round_ratios(metric, {**where, column: level}, {**where, column: first})
            ratios[level], rounds[level] = float(each.median()), tuple(each)
        except Unmeasured:
            m.values(metric, **where, **{column: first})  # raises when the reference is missing
            unmeasured.append(level)
    if len(ratios) < 2:
        raise Unmeasured(f"{column}: no valid level beside {first} where {where or 'anywhere'}")
    curve = Bend(ratios, tuple(unmeasured), rounds)
    return replace(curve, at=next(iter(curve.on_side(direction, band)), None))


def beside(m: Measured, metric: str, column: str, over: str = URING, under: str = EPOLL,
           **where: object) -> Ratios:
    """metric of dispatch `over` over dispatch `under` at each level of column, within each
    round. A level without a valid point of both in one round is named, not skipped."""
    ratios, unmeasured, rounds = {}, [], {}
    for level in m.levels(column, recorded=True, dispatch=over, **where):
        at = {**where, column: level}
        try:
            each = m.round_ratios(metric, {**at, "dispatch": over}, {**at, "dispatch": under})
            ratios[level], rounds[level] = float(each.median()), tuple(each)
        except Unmeasured:
            unmeasured.append(level)
    if not ratios:
        raise Unmeasured(f"{metric}: no round measured {over} and {under} validly at any "
                         f"{column} where {where or 'anywhere'}")
    return Ratios(ratios, tuple(unmeasured), rounds)


def _against_band(ratios: Ratios) -> str:
    """Where one series over another is above, below or within 1 ± BAND in every round, and
    where its rounds disagree: a median of two rounds says no more than both do."""
    if ratios.every_round("within") == ratios.levels:
        return f"within {BAND:.0%} in every round at every level measured"
    sides = {f"above by more than {BAND:.0%}": ratios.every_round("rise"),
             f"below by more than {BAND:.0%}": ratios.every_round("fall"),
             f"within {BAND:.0%}": ratios.every_round("within")}
    agreed = {level for levels in sides.values() for level in levels}
    sides["the rounds disagree"] = [level for level in ratios.levels if level not in agreed]
    return "; ".join(f"{name} at {', '.join(_level(level) for level in levels)}"
                     for name, levels in sides.items() if levels)


def _state(conns: object, llc_bytes: int | None) -> str:
    """The kernel state conns connections hold at the server (the measured host), and against
    the LLC."""
    size = float(conns) * CONN_STATE_BYTES  # type: ignore[arg-type]
    against = (f", {size / llc_bytes:.2g}× the {llc_bytes / MIB:,.0f} MiB last-level cache"
               if llc_bytes else ", the last-level cache not recorded")
    return f"{size / MIB:,.0f} MiB of connection state at the server{against}"


def connection_state_rise(m: Measured, llc_bytes: int | None) -> str:
    """cpp Fig 5 continued: where the stack's in-kernel time per packet rises with
    connections, and the connection state there."""
    curve = bend(m, derive.KERNEL_STACK, "stream_conns", "rise")
    top = curve.levels[-1]
    said = (f"rises past {BAND:.0%} first at {_level(curve.at)} connections "
            f"({_state(curve.at, llc_bytes)})" if curve.at is not None else
            f"no rise past {BAND:.0%} up to {_level(top)} connections "
            f"({_state(top, llc_bytes)})")
    return (f"the stack's in-kernel ns per packet from {_level(curve.levels[0])} to "
            f"{_level(top)} "
            f"connections: ×{curve.ratios[top]:.3g}; {said}. Each level / the lowest: "
            f"{curve.curve()}")


def cold_bend(m: Measured) -> str:
    """BM98 Fig 9 continued: where epoll's saturation throughput falls with cold
    connections (the sweep ends where one server process's descriptors do)."""
    curve = bend(m, "reply_rate_rps", "cold_conns", "fall", dispatch="epoll")
    top = curve.levels[-1]
    said = (f"stays within {BAND:.0%} of its rate at {_level(curve.levels[0])} cold up to "
            f"{_level(curve.within_up_to())}, then falls at {_level(curve.at)} "
            f"({curve.ratios[curve.at]:.3g}×)" if curve.at is not None else
            f"does not fall by {BAND:.0%} up to {_level(top)} cold connections (the sweep's "
            "last level)")
    return f"epoll's saturation throughput {said}. Each level / the lowest: {curve.curve()}"


def uring_over_epoll(m: Measured, metric: str, column: str, what: str,
                     **where: object) -> str:
    """io_uring's metric over epoll's at each level of column, within rounds, and where the
    two are more than the band apart."""
    ratios = beside(m, metric, column, **where)
    return (f"io_uring's {what} / epoll's at each {_axis(column)}: {ratios.curve()}; "
            f"{_against_band(ratios)}")


def _axis(column: str) -> str:
    """A sweep column as the findings name its levels."""
    return AXES.get(column, column)


def each_rate(m: Measured, said: Callable[..., str]) -> str:
    """said(offered_rate_rps=rate) at each offered rate of the run, each measured or not on
    its own (CM01 Figs 3-5 sweep connections at two fixed rates)."""
    parts = []
    for rate in m.levels("offered_rate_rps", recorded=True, dispatch=URING):
        try:
            text = said(offered_rate_rps=rate)
        except Unmeasured as exc:
            text = f"not measured: {exc}"
        parts.append(f"at {_level(rate)} req/s, {text}")
    return "; ".join(parts)


def uring_cold_band(m: Measured) -> str:
    """BMD99 Fig 8's axis: whether io_uring's reply rate stays within the band of its rate at
    0 cold, as BMD99 found of its event API, either way."""
    curve = bend(m, "reply_rate_rps", "cold_conns", "either", dispatch=URING)
    first, top = curve.levels[0], curve.levels[-1]
    band = f"the {BAND:.0%} band around its rate at {_level(first)} cold"
    if curve.at is None:
        said = f"stays within {band} at every level measured, up to {_level(top)}"
    else:
        within = curve.within_up_to()
        said = (f"leaves {band} at {_level(curve.at)} ({curve.ratios[curve.at]:.3g}×)"
                + (f", within it up to {_level(within)}" if within != first else ""))
    return f"io_uring's reply rate {said}. Each level / the lowest: {curve.curve()}"


@dataclass(frozen=True)
class Finding:
    title: str
    scenario: str
    run: str | None
    text: str  # what the run found, or why it says nothing


def _llc_bytes(run: RunSet) -> int | None:
    manifest = next(iter(run.raw_manifests.values()), {})
    return (manifest.get("cpu") or {}).get("last_level_cache_bytes")


FINDINGS: tuple[tuple[str, str, Callable[[Measured, RunSet], str]], ...] = (
    ("cpp Fig 5 past 2048 connections, until the connection state is past the last-level "
     "cache", LLC_SCENARIO, lambda m, run: connection_state_rise(m, _llc_bytes(run))),
    ("BM98 Fig 9 past 2000 cold connections: where the scalable mechanism's curve bends",
     COLD_SCENARIO, lambda m, run: cold_bend(m)),
    ("io_uring beside epoll on BMD99 Fig 8's axis: reply rate vs cold connections",
     URING_COLD_SCENARIO,
     lambda m, run: uring_over_epoll(m, "reply_rate_rps", "cold_conns", "reply rate")),
    ("io_uring on BMD99 Fig 8's axis: whether its reply rate is independent of cold "
     "connections", URING_COLD_SCENARIO, lambda m, run: uring_cold_band(m)),
    ("io_uring beside epoll on BMD99 Fig 9's axis: reply rate vs request rate, 750 cold",
     URING_RATE_SCENARIO,
     lambda m, run: uring_over_epoll(m, "reply_rate_rps", "offered_rate_rps", "reply rate")),
    ("io_uring beside epoll on BMD99 Fig 9's axis: mean response time vs request rate, "
     "750 cold", URING_RATE_SCENARIO,
     lambda m, run: uring_over_epoll(m, "resp_time_mean_ms", "offered_rate_rps",
                                     "mean response time")),
    ("io_uring beside epoll on CM01 Fig 4's axis: server CPU vs connections",
     URING_CONNS_SCENARIO,
     lambda m, run: each_rate(m, lambda **rate: uring_over_epoll(
         m, "cpu_server_pct", "total_conns", "server CPU", **rate))),
    ("io_uring beside epoll on CM01 Fig 5's axis: mean response time vs connections",
     URING_CONNS_SCENARIO,
     lambda m, run: each_rate(m, lambda **rate: uring_over_epoll(
         m, "resp_time_mean_ms", "total_conns", "mean response time", **rate))),
)


def findings(runs: RunSet | None) -> list[Finding]:
    """Each finding from the newest run of its scenario among runs."""
    out = []
    for title, scenario, find in FINDINGS:
        mine = runs.scenario(scenario) if runs is not None else None
        if mine is None or mine.manifests.empty:
            out.append(Finding(title, scenario, None, f"no run of {scenario}"))
            continue
        run = mine.newest()
        run_id = str(run.manifests["run_id"].iloc[0])
        try:
            text = find(Measured(run.points, run.profiles), run)
        except Unmeasured as exc:
            text = f"not measured: {exc}"
        out.append(Finding(title, scenario, run_id, text))
    return out


def markdown(results: list[Finding]) -> str:
    """REPRODUCTION.md's section: one item per finding, labelled beyond the papers."""
    out = ["Beyond the papers: no paper makes these claims, and nothing here is PASS or FAIL "
           "(harness/reproduce/beyond.py).", ""]
    for finding in results:
        run = f", run {finding.run}" if finding.run else ""
        out.append(f"- **{finding.title}** (`{finding.scenario}`{run}): {finding.text}")
    return "\n".join(out)
