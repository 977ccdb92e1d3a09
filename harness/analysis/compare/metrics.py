"""Which metrics `wanbench compare` knows: direction, how a change is measured, and where a
repetition's least noise comes from."""

from __future__ import annotations

from dataclasses import dataclass

from harness.results.format import (
    KERNEL_DIRECTIONS,
    KERNEL_FAMILIES,
    KERNEL_FUNCTIONS,
    kernel_column,
    kernel_function_column,
)

# A CPU percentage is compared as a difference in percentage points, never as a relative
# change: its run-to-run noise is additive (CPU time the server is charged for whatever its
# load: timer ticks, the samplers, a neighbour's cache traffic), so the disturbance that is
# 2 % of 50 % CPU reads +25 % at 5 % (docs/compare.md, "CPU: percentage points"). CPU per
# reply would not help: at a fixed offered rate it is the CPU divided by a constant, with the same
# relative swing. A difference in points has about the same noise at every load.
POINTS_MIN_EFFECT = 1.0  # pp: smaller differences are never a regression (2 % of half a CPU)
POINTS_DETECT = 2.5  # pp: what `~` promises would have been seen (5 % of half a CPU)


@dataclass(frozen=True)
class Metric:
    """One comparable metric of points.parquet."""

    name: str
    higher_is_better: bool
    points: bool = False  # a CPU percentage: its change is a difference in percentage points
    # Latency metrics: the histogram kind and statistic ("mean" or a quantile in (0, 1)),
    # whose resolution is the least noise a repetition's value has.
    histogram: tuple[str, str | float] | None = None
    # Only comparable when cycles were counted alike in every run (hardware or estimated).
    estimated_cycles: bool = False

    @property
    def sign(self) -> int:
        """+1 when higher is better, -1 when lower is better."""
        return 1 if self.higher_is_better else -1


def _latency(name: str, kind: str, statistic: str | float) -> Metric:
    return Metric(name, False, histogram=(kind, statistic))


def _cpu(name: str, higher_is_better: bool = False) -> Metric:
    return Metric(name, higher_is_better, points=True)


_CATALOGUE = (
    Metric("reply_rate_rps", True),
    Metric("request_rate_rps", True),
    Metric("stream_throughput_mbps", True),
    Metric("content_throughput_mbps", True),
    _cpu("cpu_idle_pct", higher_is_better=True),
    _latency("resp_time_mean_ms", "corrected", "mean"),
    _latency("resp_time_p50_ms", "corrected", 0.5),
    _latency("resp_time_p99_ms", "corrected", 0.99),
    _latency("resp_time_uncorrected_mean_ms", "uncorrected", "mean"),
    _latency("resp_time_uncorrected_p50_ms", "uncorrected", 0.5),
    _latency("resp_time_uncorrected_p99_ms", "uncorrected", 0.99),
    _cpu("cpu_server_pct"),
    _cpu("cpu_server_user_pct"),
    _cpu("cpu_server_sys_pct"),
    Metric("cycles_per_packet", False, estimated_cycles=True),
    Metric("instructions_per_packet", False),
    Metric("cpu_us_per_conn", False),
    Metric("errors_total", False),
    Metric("timeouts_total", False),
    Metric("sigio_overflows", False),
)
# In-kernel time (kernel_trace: true), per call of each family, per packet each way and, where
# fentry works, per call of each function the papers timed: a regression names the call, the
# layer or the function that grew. Repetition means only (no per-second series); a run without
# kernel_trace (or without fentry) has none, so the defaults leave them out there.
KERNEL_METRICS = (*(kernel_column(f, "ns_per_call") for f in KERNEL_FAMILIES),
                  *(kernel_column(d, "ns_per_packet") for d in KERNEL_DIRECTIONS),
                  *(kernel_function_column(f, "ns_per_call") for f in KERNEL_FUNCTIONS))
METRICS: dict[str, Metric] = {m.name: m for m in (
    *_CATALOGUE, *(Metric(name, False) for name in KERNEL_METRICS))}

DEFAULT_METRICS = (
    "reply_rate_rps", "resp_time_mean_ms", "resp_time_p99_ms", "cpu_server_pct",
    "cycles_per_packet", "stream_throughput_mbps", *KERNEL_METRICS,
)
# content_throughput_mbps and cpu_us_per_conn are computed on loading
# (harness.analysis.derive.add_derived), not stored in points.parquet.


class UnknownMetric(ValueError):
    """A metric name wanbench compare cannot judge."""


def metric(name: str) -> Metric:
    try:
        return METRICS[name]
    except KeyError:
        raise UnknownMetric(
            f"metric {name!r}: not one compare can judge (its direction is unknown); "
            f"use one of {', '.join(METRICS)}"
        ) from None
