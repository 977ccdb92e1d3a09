"""Response times from a run's stored histograms (histograms.parquet) as HdrHistograms (the
`hdrhistogram` package): percentile spectra in the HdrHistogram style, and .hgrm files that
the tools wrk2 users have (HdrHistogram's plotter) read."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pandas as pd
from hdrh.histogram import HdrHistogram

KINDS = ("corrected", "uncorrected")  # tcp_srtt, also stored, is not a response time
METRIC_OF_KIND = {"corrected": "latency_corrected_ms", "uncorrected": "latency_uncorrected_ms"}
CDF_OF_KIND = {"corrected": "cdf_corrected", "uncorrected": "cdf_uncorrected"}
# ns in, 3 significant figures (finer than the generators' 128 buckets per octave), up to an
# hour: every value a generator can store fits
HIGHEST_NS = 3_600 * 10**9
SIGNIFICANT_FIGURES = 3
NS_PER_MS = 1e6
# The spectrum's percentiles: ten per decade of 1/(1-p), from the median up to the largest
# value recorded
SPECTRUM_STEPS_PER_DECADE = 10


def to_hdr(rows: pd.DataFrame) -> HdrHistogram:
    """Histogram rows (lo_us, hi_us, count: one point × repetition, or several merged) as an
    HdrHistogram: each bucket's count at its midpoint, the finest detail the generators keep."""
    hdr = HdrHistogram(1, HIGHEST_NS, SIGNIFICANT_FIGURES)
    middles = ((rows["lo_us"] + rows["hi_us"]) * 500.0).round().astype("int64").clip(lower=1)
    for value, count in zip(middles, rows["count"].astype("int64"), strict=True):
        if count > 0:
            hdr.record_value(int(value), int(count))
    return hdr


def _values_ms(hdr: HdrHistogram, percentiles: np.ndarray) -> list[float]:
    """The values at percentiles, in one walk of the counts (a walk per percentile took
    most of the time of drawing the reference figures)."""
    found = hdr.get_percentile_to_value_dict([float(p) for p in percentiles])
    return [found[float(p)] / NS_PER_MS for p in percentiles]


def spectrum(hdr: HdrHistogram) -> pd.DataFrame:
    """percentile, tail (1/(1-p): 2 at the median, 1000 at 99.9 %), value_ms; up to the
    highest percentile the count resolves."""
    count = hdr.get_total_count()
    if count == 0:
        return pd.DataFrame(columns=["percentile", "tail", "value_ms"])
    decades = np.log10(max(count, 2))
    tails = 10 ** np.arange(np.log10(2), decades + 1e-9, 1 / SPECTRUM_STEPS_PER_DECADE)
    percentiles = 100.0 * (1 - 1 / tails)
    return pd.DataFrame({"percentile": percentiles, "tail": tails,
                         "value_ms": _values_ms(hdr, percentiles)})


def cdf(hdr: HdrHistogram) -> pd.DataFrame:
    """value_ms, fraction (of responses at or below it): every percent below the median, then
    the spectrum's percentiles, denser towards the tail."""
    tail = spectrum(hdr)
    if tail.empty:
        return pd.DataFrame(columns=["value_ms", "fraction"])
    low = np.arange(1.0, 50.0)
    return pd.DataFrame({"value_ms": [*_values_ms(hdr, low), *tail["value_ms"]],
                         "fraction": [*(low / 100), *(tail["percentile"] / 100)]})


def write_hgrm(hdr: HdrHistogram, path: Path) -> Path:
    """The percentile distribution as HdrHistogram prints it (values in ms, as wrk2's). The
    hdrhistogram package scales the footer's mean but not its standard deviation, which it
    leaves in ns: written here in ms, as Java's HdrHistogram does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    out = io.BytesIO()
    hdr.output_percentile_distribution(out, NS_PER_MS)
    text = re.sub(r"(StdDeviation\s+=\s*)[\d.]+",
                  lambda m: f"{m.group(1)}{hdr.get_stddev() / NS_PER_MS:.3f}",
                  out.getvalue().decode())
    path.write_text(text)
    return path
