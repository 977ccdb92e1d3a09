"""The window: the one interval a point × repetition measures, decided by the runner on
CLOCK_MONOTONIC (`time.monotonic_ns()`, what C's clock_gettime(CLOCK_MONOTONIC) and BPF's
bpf_ktime_get_ns read; network namespaces share it) and handed to every source of the
point's numbers: the generators, the server's stats reads, the samplers and wb-ktrace. Each
source records the edges it actually used (Edges, by source: harness.results.format's
WINDOW_SOURCES); the record keeps them as offsets from the runner's edges
(harness.results.rows.window_columns), and clients.validity judges a
window whose sources disagree (window_disagrees).

On several hosts, whose CLOCK_MONOTONIC readings have nothing in common, the run's host
decides the window on its time.time() (the clock whose offsets harness.cluster measures);
each host reads it on its own time.time() through the measured offset and on its own
CLOCK_MONOTONIC through Window.of_wall, and hands its sources' edges back on time.time()
(wall_edges). A cluster point's window and edges are kept on the run's host's time.time(),
in ns."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, NamedTuple

from harness.monotonic import NS_PER_S


@dataclass(frozen=True)
class Window:
    """[start_ns, end_ns) on one host's CLOCK_MONOTONIC."""

    start_ns: int
    end_ns: int

    def __post_init__(self) -> None:
        if self.end_ns <= self.start_ns:
            raise ValueError(f"a window ends after it starts: {self.start_ns} .. {self.end_ns}")

    @classmethod
    def after(cls, warmup_s: float, duration_s: float, now_ns: int | None = None) -> Window:
        """The point's window decided now: the warm-up from now, then duration_s measured."""
        start = (time.monotonic_ns() if now_ns is None else now_ns) + round(warmup_s * NS_PER_S)
        return cls(start, start + round(duration_s * NS_PER_S))

    @property
    def length_s(self) -> float:
        return (self.end_ns - self.start_ns) / NS_PER_S

    @classmethod
    def of_wall(cls, start_s: float, end_s: float) -> Window:
        """The interval between two instants of this host's time.time(), on its
        CLOCK_MONOTONIC."""
        shift = time.monotonic_ns() - time.time_ns()  # read once: both edges move alike
        return cls(round(start_s * NS_PER_S) + shift, round(end_s * NS_PER_S) + shift)

    def on_clock(self, offset_s: float) -> Window:
        """The same interval as read on a clock offset_s ahead of this one's."""
        shift = round(offset_s * NS_PER_S)
        return Window(self.start_ns + shift, self.end_ns + shift)


class Edges(NamedTuple):
    """The interval one source actually measured over, on the window's clock."""

    start_ns: int
    end_ns: int


def wall_edges(edges: Edges) -> Edges:
    """Edges on this host's CLOCK_MONOTONIC as instants of its time.time() (ns)."""
    shift = time.time_ns() - time.monotonic_ns()
    return Edges(edges.start_ns + shift, edges.end_ns + shift)


def generator_edges(document: dict[str, Any]) -> Edges | None:
    """The edges a generator's result document says it counted between (clients/SCHEMA.md
    `window`); None when it does not say (httperf, wrk, wrk2)."""
    counted = document.get("window")
    if not counted:
        return None
    return Edges(int(counted["start_ns"]), int(counted["end_ns"]))
