"""What the asyncio generator counts; laid out like wb-sclient's result block."""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from clients.schema import Histogram


@dataclass
class Counters:
    sent: int = 0
    queued: int = 0
    dropped: int = 0
    replies: int = 0
    scheduled: int = 0
    late: int = 0
    max_slip_ns: int = 0
    by_status: collections.Counter = field(default_factory=collections.Counter)
    errors: collections.Counter = field(default_factory=collections.Counter)
    corrected: Histogram = field(default_factory=Histogram)
    uncorrected: Histogram = field(default_factory=Histogram)
    tcp_srtt: Histogram = field(default_factory=Histogram)
    timeline: dict[int, list[int]] = field(
        default_factory=lambda: collections.defaultdict(lambda: [0, 0, 0]))  # sent, replies, errors
    cold_established: int = 0
    cold_reconnected: int = 0
    cold_failed: int = 0
    cold_requests: int = 0
    cold_replies: int = 0
    established_s: float | None = None
