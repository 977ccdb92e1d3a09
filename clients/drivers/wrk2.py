"""wrk2: wrk with a constant request rate and HdrHistogram output (used when on PATH)."""

from __future__ import annotations

import re
from typing import Any

from clients.drivers.common import Unsupported, check_command
from clients.drivers.wrk import base_argv, parse_common, percentiles, url
from clients.schema import null_histogram
from clients.spec import LoadSpec

TOOL = "wrk2"
UNCORRECTED = "Uncorrected Latency"


def command(spec: LoadSpec) -> list[str]:
    if spec.rate_rps is None:
        raise Unsupported("wrk2 needs a rate (it is an open-loop tool); use wrk for a closed loop")
    if spec.arrivals != "fixed":
        raise Unsupported("wrk2 sends at fixed intervals only; use sclient for Poisson arrivals")
    return check_command(spec, [*base_argv(spec, TOOL, "wrk2"), f"-R{spec.rate_rps:g}", "-U",
                                url(spec)])


def spectrum(block: str) -> dict[str, Any]:
    """An H object from one 'Detailed Percentile spectrum' (values in ms, cumulative counts)."""
    rows = re.findall(r"^\s*([\d.]+)\s+([\d.]+)\s+(\d+)\s+(?:[\d.]+|inf)\s*$", block, re.MULTILINE)
    known = percentiles(block)
    mean = re.search(r"#\[Mean\s*=\s*([\d.]+)", block)
    top = re.search(r"#\[Max\s*=\s*([\d.]+),\s*Total count\s*=\s*(\d+)", block)
    if not rows or not top:
        return null_histogram(**known)
    buckets, prev_us, prev_n = [], None, 0
    for value, _pct, cumulative in rows:
        us, n = float(value) * 1e3, int(cumulative)
        if n > prev_n:
            lo = prev_us if prev_us is not None else us
            buckets.append([round(lo, 3), round(us, 3), n - prev_n])
        prev_us, prev_n = us, n
    h = null_histogram(**known)
    h.update(buckets=buckets, count=int(top.group(2)), min_us=float(rows[0][0]) * 1e3,
             max_us=float(top.group(1)) * 1e3, mean_us=float(mean.group(1)) * 1e3 if mean else None)
    return h


def parse(spec: LoadSpec, stdout: str, stderr: str) -> dict[str, Any]:
    doc = parse_common(spec, stdout, TOOL)
    recorded, _, uncorrected = stdout.partition(UNCORRECTED)
    doc["latency"] = {
        "corrected": spectrum(recorded.split("Latency Distribution", 1)[-1]),
        "uncorrected": spectrum(uncorrected) if uncorrected else null_histogram(),
    }
    calib = re.search(r"Thread calibration: mean lat\.: ([\d.]+)(us|ms|s)", stdout)
    doc["config"]["calibration"] = calib.group(0).strip() if calib else None
    return doc
