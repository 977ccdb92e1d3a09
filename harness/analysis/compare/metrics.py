"""Which metrics `wanbench compare` knows: direction, and where their finer-grained data lives."""

from __future__ import annotations

from dataclasses import dataclass

from harness.results.format import KERNEL_DIRECTIONS, KERNEL_FAMILIES, kernel_column

Series = tuple[tuple[str, str], ...]  # (source, metric) pairs in timeseries.parquet, summed


@dataclass(frozen=True)
class Metric:
    """One comparable metric of points.parquet."""

    name: str
    higher_is_better: bool
    # Per-second samples whose window mean is this metric (up to a constant factor, which
    # does not matter: only their relative spread is used). numerator / denominator.
    numerator: Series = ()
    denominator: Series = ()
    # The generator's timeline counts from its start (warm-up included); the samplers' from
    # the window's start. Only the generator's needs cutting to the measured window.
    generator_clock: bool = False
    # Latency metrics: the histogram kind and statistic ("mean" or a quantile in (0, 1)).
    histogram: tuple[str, str | float] | None = None
    # Only comparable when cycles were estimated on both sides (CPU time x TSC), in which
    # case the per-second CPU and packet rates give its per-second values.
    estimated_cycles: bool = False

    @property
    def sign(self) -> int:
        """+1 when higher is better, -1 when lower is better."""
        return 1 if self.higher_is_better else -1


def _latency(name: str, kind: str, statistic: str | float) -> Metric:
    return Metric(name, False, histogram=(kind, statistic))


_CATALOGUE = (
    Metric("reply_rate_rps", True, (("generator", "replies"),), generator_clock=True),
    Metric("request_rate_rps", True, (("generator", "sent"),), generator_clock=True),
    Metric("stream_throughput_mbps", True),
    Metric("content_throughput_mbps", True),
    Metric("cpu_idle_pct", True, (("server_cpu", "idle_pct"),)),
    _latency("resp_time_mean_ms", "corrected", "mean"),
    _latency("resp_time_p50_ms", "corrected", 0.5),
    _latency("resp_time_p99_ms", "corrected", 0.99),
    _latency("resp_time_uncorrected_mean_ms", "uncorrected", "mean"),
    _latency("resp_time_uncorrected_p50_ms", "uncorrected", 0.5),
    _latency("resp_time_uncorrected_p99_ms", "uncorrected", 0.99),
    Metric("cpu_server_pct", False, (("server_proc", "cpu_pct"),)),
    Metric("cpu_server_user_pct", False, (("server_proc", "user_pct"),)),
    Metric("cpu_server_sys_pct", False, (("server_proc", "sys_pct"),)),
    Metric("cycles_per_packet", False, (("server_proc", "cpu_pct"),),
           (("server_net", "packets_in_per_s"), ("server_net", "packets_out_per_s")),
           estimated_cycles=True),
    Metric("instructions_per_packet", False),
    Metric("cpu_us_per_conn", False),
    Metric("errors_total", False),
    Metric("timeouts_total", False),
    Metric("sigio_overflows", False),
)
# In-kernel time (kernel_trace: true), per call of each family and per packet each way: a
# regression names the call or the layer that grew. Repetition means only (no per-second
# series); a run without kernel_trace has none, so the defaults leave them out there.
KERNEL_METRICS = (*(kernel_column(f, "ns_per_call") for f in KERNEL_FAMILIES),
                  *(kernel_column(d, "ns_per_packet") for d in KERNEL_DIRECTIONS))
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
