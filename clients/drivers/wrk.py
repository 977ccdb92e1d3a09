"""wrk: closed-loop HTTP benchmark (Debian package). Output parsed into the result schema."""

from __future__ import annotations

import re
from typing import Any

from clients.drivers.common import (
    Unsupported,
    check_command,
    duration_us,
    prefix,
    refuse,
    search,
    to_us,
    tool_path,
)
from clients.schema import ERROR_KINDS, null_histogram, skeleton
from clients.spec import LoadSpec
from clients.targets import url_for

TOOL = "wrk"
PERCENTILE_KEYS = {"50": "p50_us", "90": "p90_us", "99": "p99_us", "99.9": "p999_us",
                   "99.900": "p999_us", "50.000": "p50_us", "90.000": "p90_us", "99.000": "p99_us"}


def url(spec: LoadSpec) -> str:
    host, port = spec.resolved_targets()[0]
    return url_for(host, port, spec.path)


def base_argv(spec: LoadSpec, tool: str, binary: str) -> list[str]:
    refuse(spec, tool)
    if spec.requests_per_conn is not None:
        raise Unsupported(f"{tool} keeps connections persistent; use sclient for "
                          "requests_per_conn")
    threads = spec.threads or (1 if spec.cpu is not None else 2)
    threads = max(1, min(threads, spec.hot_conns))
    # wrk has no warm-up: the whole run is measured, so it runs warmup + duration
    seconds = max(1, round(spec.warmup_s + spec.duration_s))
    return [*prefix(spec), tool_path(binary), f"-t{threads}", f"-c{spec.hot_conns}",
            f"-d{seconds}s", f"--timeout={max(1, round(spec.response_timeout_s))}s", "--latency"]


def command(spec: LoadSpec) -> list[str]:
    if spec.rate_rps is not None:
        raise Unsupported("wrk has no constant-rate mode (closed loop only); use wrk2 when "
                          "installed, or sclient/asyncio for an open loop")
    return check_command(spec, [*base_argv(spec, TOOL, "wrk"), url(spec)])


def parse_common(spec: LoadSpec, stdout: str, tool: str) -> dict[str, Any]:
    """The summary lines wrk and wrk2 share."""
    doc = skeleton(tool, spec.config())
    m = search(r"^\s*(\d+) requests in ([\d.]+\w+), ([\d.]+\w+) read", stdout, tool)
    replies, window_s = int(m.group(1)), duration_us(m.group(2)) / 1e6
    non2xx = re.search(r"^\s*Non-2xx or 3xx responses: (\d+)", stdout, re.MULTILINE)
    bad = int(non2xx.group(1)) if non2xx else 0
    by_status = {"2xx": replies - bad} | ({"non_2xx_3xx": bad} if bad else {})
    errors = dict.fromkeys(ERROR_KINDS, 0)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)",
                     stdout)
    if sock:
        connect, read, write, timeout = map(int, sock.groups())
        # wrk connects without blocking and writes first: a refused connection fails the
        # write, so its write errors are refusals (or a peer that is gone), not "other"
        errors |= {"refused": connect + write, "reset": read, "response_timeout": timeout}
    rate = float(search(r"^Requests/sec:\s+([\d.]+)", stdout, tool).group(1))
    doc.update(
        generator_version=None,
        duration_s=window_s,
        warmup_s=0.0,
        request_rate_rps=None,  # wrk counts completed requests only
        reply_rate_rps=rate,
        requests={"scheduled": None, "sent": None, "queued": None, "dropped": None},
        replies={"total": replies, "by_status": by_status},
        errors=errors,
    )
    doc["config"]["measured_warmup"] = "wrk measures its whole run, warm-up included"
    return doc


def thread_latency(stdout: str) -> dict[str, float]:
    m = re.search(r"^\s*Latency\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)",
                  stdout, re.MULTILINE)
    if not m:
        return {}
    return {"mean_us": to_us(m.group(1), m.group(2)), "max_us": to_us(m.group(5), m.group(6))}


def percentiles(block: str) -> dict[str, float]:
    out = {}
    rows = re.findall(r"^\s*([\d.]+)%\s+([\d.]+)(us|ms|s)\s*$", block, re.MULTILINE)
    for pct, value, unit in rows:
        key = PERCENTILE_KEYS.get(pct)
        if key:
            out[key] = to_us(value, unit)
    return out


def parse(spec: LoadSpec, stdout: str, stderr: str) -> dict[str, Any]:
    doc = parse_common(spec, stdout, TOOL)
    dist = stdout.split("Latency Distribution", 1)
    known = thread_latency(stdout) | (percentiles(dist[1]) if len(dist) > 1 else {})
    # closed loop: no schedule, so there is nothing to correct against
    doc["latency"] = {"corrected": null_histogram(), "uncorrected": null_histogram(**known)}
    doc["offered_rate_rps"] = None
    return doc
