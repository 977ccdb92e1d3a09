"""Beyond the papers: what the sweeps none of the papers could make found, read from their runs.

Nothing here is judged against a paper (no PASS or FAIL). Each finding says, from the newest
run of its scenario, where a curve leaves a band around its sweep's lowest level (cpp Fig 5
continued past the last-level cache, BM98 Fig 9 continued to one process's descriptor limit).
Ratios are within rounds (harness.reproduce.verdict.Measured.round_ratios), as the checks'.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from harness.analysis import derive
from harness.reproduce.verdict import Measured, Unmeasured
from harness.results.runset import RunSet

LLC_SCENARIO = "cpp-fig5-beyond-llc"
COLD_SCENARIO = "bm98-fig9-beyond"
# Run by `make beyond` (`wanbench reproduce --run --only` them): not by `make reproduce`,
# whose papers' targets alone fill its budget (harness.reproduce.run)
SCENARIOS = (LLC_SCENARIO, COLD_SCENARIO)

# A curve bends where a level is more than 10 % off its lowest level: the band within which
# the checks hold BMD99's epoll "independent" of cold connections (claims, bmd99-fig8).
BAND = 0.10
# One connection's kernel state at one end, from /proc/slabinfo with 131,072 connections open
# on this machine (cpp-fig5-beyond-llc): the objects that grew by one per socket, TCP (struct
# tcp_sock) 2,368 B, sock_inode_cache 832, dentry 192, filp 192, eventpoll_epi 128,
# lsm_file_cache 24, ep_head 16.
CONN_STATE_BYTES = 2368 + 832 + 192 + 192 + 128 + 24 + 16
MIB = 2**20


@dataclass(frozen=True)
class Bend:
    """A curve against its lowest level: each level's ratio to it (the median of the rounds'),
    the first level outside 1 ± band in the direction asked (None: none was), and the levels
    swept that no round measured validly beside the lowest."""

    ratios: dict[object, float]
    at: object | None
    unmeasured: tuple = ()

    @property
    def levels(self) -> list:
        return list(self.ratios)

    def within_up_to(self) -> object:
        """The highest level before the bend (the highest of all when there is none)."""
        before = [level for level in self.levels if self.at is None or level < self.at]
        return before[-1]

    def curve(self) -> str:
        shown = ", ".join(f"{_level(level)}: {ratio:.3g}" for level, ratio in self.ratios.items())
        missing = ", ".join(_level(level) for level in self.unmeasured)
        return shown + (f" (no valid point at {missing})" if missing else "")


def _level(value: object) -> str:
    """A sweep level as a count: 131,072, not 131072.0."""
    number = float(value)  # type: ignore[arg-type]
    return f"{number:,.0f}" if number.is_integer() else f"{number:,.3g}"


def bend(m: Measured, metric: str, column: str, direction: Literal["rise", "fall"],
         band: float = BAND, **where: object) -> Bend:
    """metric at each level of column over its value at the sweep's lowest, within each round;
    where it first rises above 1 + band (or falls below 1 - band). The lowest level is the
    reference: without a valid point there the curve is unmeasured, not moved up a level."""
    first, *rest = m.levels(column, recorded=True, **where)
    ratios, unmeasured = {first: 1.0}, []
    for level in rest:
        try:
            ratios[level] = float(m.round_ratios(metric, {**where, column: level},
                                                 {**where, column: first}).median())
        except Unmeasured:
            m.values(metric, **where, **{column: first})  # raises when the reference is missing
            unmeasured.append(level)
    if len(ratios) < 2:
        raise Unmeasured(f"{column}: no valid level beside {first} where {where or 'anywhere'}")
    outside: Callable[[float], bool] = ((lambda r: r > 1 + band) if direction == "rise"
                                        else (lambda r: r < 1 - band))
    return Bend(ratios, next((level for level in ratios if outside(ratios[level])), None),
                tuple(unmeasured))


def _state(conns: object, llc_bytes: int | None) -> str:
    """The kernel state conns connections hold at the receiver, and against the LLC."""
    size = float(conns) * CONN_STATE_BYTES  # type: ignore[arg-type]
    against = (f", {size / llc_bytes:.2g}× the {llc_bytes / MIB:,.0f} MiB last-level cache"
               if llc_bytes else ", the last-level cache not recorded")
    return f"{size / MIB:,.0f} MiB of connection state at the receiver{against}"


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
