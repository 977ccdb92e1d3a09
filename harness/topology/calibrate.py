"""Measured vs configured RTT and rate per link, right after bring-up; refusal past tolerance."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

from harness.topology.addressing import AddressPlan, LinkPlan
from harness.topology.commands import LINK_LAYER_BYTES, ns_exec
from harness.topology.model import MTU_BYTES, Link, Topology, TopologyError

AGENT = Path(__file__).with_name("rtt_agent.py")
PINGS, CONNECTS = 20, 5
RTT_TOLERANCE_FRACTION, RTT_TOLERANCE_MS = 0.01, 0.2
RATE_TOLERANCE_FRACTION = 0.05
TCP_IP_HEADER_BYTES = 52  # IPv4 20 + TCP 20 + timestamps 12
PROBE_PACKET_BYTES = 60  # a SYN with options, or a ping byte with its headers


class CalibrationError(TopologyError):
    def __init__(self, message: str, results: dict) -> None:
        super().__init__(message)
        self.results = results


def jitter_sigma_ms(spec: Link) -> float:
    """Standard deviation of the round trip added by jitter (normal: sigma; uniform: j/sqrt 3)."""
    var = 0.0
    for d in ("a_to_b", "b_to_a"):
        s = spec.direction(d)
        var += (s.jitter_ms if s.jitter_distribution == "normal" else s.jitter_ms / 3**0.5) ** 2
    return var**0.5


def rtt_tolerance_ms(configured: float, sigma: float, samples: int) -> float:
    """max(1 %, 0.2 ms), widened by 3 standard errors of a median when the link jitters."""
    return max(RTT_TOLERANCE_FRACTION * configured, RTT_TOLERANCE_MS) + (
        3 * 1.2533 * sigma / math.sqrt(samples))


def expected_goodput_bps(rate_mbit: float, backend: str) -> float:
    """What TCP can carry over a rate limit: payload share of each full-sized packet."""
    per_packet = MTU_BYTES + LINK_LAYER_BYTES[backend]
    return rate_mbit * 1e6 * (MTU_BYTES - TCP_IP_HEADER_BYTES) / per_packet


def rate_measurable(spec: Link, direction: str) -> bool:
    """Bulk TCP shows the rate only without random loss or reordering jitter on its path."""
    shaping = spec.direction(direction)
    return bool(shaping.rate_mbit) and not (shaping.loss_pct or shaping.jitter_ms)


def bulk_seconds(rtt_ms: float) -> float:
    return max(1.5, 30 * rtt_ms / 1000)


def _agent(netns: str, *args: str) -> list[str]:
    return ns_exec(netns, [sys.executable, str(AGENT), *args])


def measure_link(plan: AddressPlan, link: LinkPlan, upload_s: float, download_s: float) -> dict:
    """Connect and ping-pong RTTs and bulk goodput from host a to host b across the link."""
    ns_a, ns_b = plan.hosts[link.a].netns, plan.hosts[link.b].netns
    server = subprocess.Popen(_agent(ns_b, "serve", "--bind", link.b_addr),
                              stdout=subprocess.PIPE, text=True)
    try:
        port = server.stdout.readline().strip()
        if not port:
            raise CalibrationError(f"link {link.name}: measurement agent did not start in "
                                   f"{ns_b}", {})
        out = subprocess.run(
            _agent(ns_a, "measure", "--host", link.b_addr, "--port", port,
                   "--pings", str(PINGS), "--connects", str(CONNECTS),
                   "--upload-s", str(upload_s), "--download-s", str(download_s)),
            capture_output=True, text=True, timeout=30 + upload_s + download_s)
    finally:
        server.terminate()
        server.wait()
    if out.returncode != 0:
        raise CalibrationError(f"link {link.name}: measurement failed: {out.stderr.strip()}",
                               {})
    return json.loads(out.stdout)


def judge(name: str, spec: Link, backend: str, raw: dict) -> dict:
    """Compares an agent's measurements of link `name` with its configuration."""
    # A rate limit also serialises the probe packets themselves, once each way.
    configured = spec.rtt_ms() + sum(
        PROBE_PACKET_BYTES * 8 / (spec.direction(d).rate_mbit * 1e3)
        for d in ("a_to_b", "b_to_a") if spec.direction(d).rate_mbit)
    tolerance = rtt_tolerance_ms(configured, jitter_sigma_ms(spec), len(raw["ping_ms"]))
    result = {
        "configured_rtt_ms": configured,
        "ping_rtt_median_ms": statistics.median(raw["ping_ms"]),
        "connect_rtt_median_ms": statistics.median(raw["connect_ms"]),
        "rtt_tolerance_ms": tolerance,
        "samples": {"ping": len(raw["ping_ms"]), "connect": len(raw["connect_ms"])},
        "rate": {},
        "problems": [],
    }
    for kind in ("ping", "connect"):
        measured = result[f"{kind}_rtt_median_ms"]
        result[f"{kind}_rtt_error_ms"] = measured - configured
        if abs(measured - configured) > tolerance:
            result["problems"].append(
                f"link {name}: {kind} RTT median {measured:.3f} ms vs configured "
                f"{configured:.3f} ms (tolerance ±{tolerance:.3f} ms)")
    for direction, key in (("a_to_b", "upload_bps"), ("b_to_a", "download_bps")):
        rate = spec.direction(direction).rate_mbit
        if not rate:
            continue
        if not rate_measurable(spec, direction):
            result["rate"][direction] = {"configured_mbit": rate, "judged": False,
                                         "why": "loss or jitter: TCP goodput is not the rate"}
            continue
        expected = expected_goodput_bps(rate, backend)
        measured = raw.get(key) or 0.0
        error = measured / expected - 1
        result["rate"][direction] = {"configured_mbit": rate, "judged": True,
                                     "expected_goodput_mbit": expected / 1e6,
                                     "measured_goodput_mbit": measured / 1e6,
                                     "error_pct": 100 * error}
        if abs(error) > RATE_TOLERANCE_FRACTION:
            result["problems"].append(
                f"link {name} {direction}: TCP goodput {measured / 1e6:.3f} Mbit/s vs expected "
                f"{expected / 1e6:.3f} Mbit/s for {rate:g} Mbit/s "
                f"(tolerance ±{100 * RATE_TOLERANCE_FRACTION:g} %)")
    return result


def calibrate_link(topology: Topology, plan: AddressPlan, link: LinkPlan, backend: str) -> dict:
    spec = topology.links[link.name]
    seconds = bulk_seconds(spec.max_rtt_ms())
    raw = measure_link(plan, link, seconds if rate_measurable(spec, "a_to_b") else 0.0,
                       seconds if rate_measurable(spec, "b_to_a") else 0.0)
    return judge(link.name, spec, backend, raw)


def calibrate_link_twice(topology: Topology, plan: AddressPlan, link: LinkPlan,
                         backend: str) -> dict:
    """A link out of bounds is measured once more: other users' load comes in bursts here.
    The second measurement is judged like the first, and the first is kept beside it."""
    first = calibrate_link(topology, plan, link, backend)
    if not first["problems"]:
        return first
    return {**calibrate_link(topology, plan, link, backend), "first_attempt": first}


def calibrate(topology: Topology, plan: AddressPlan, backend: str) -> dict:
    """Per link results; CalibrationError listing measured vs configured when out of bounds."""
    results = {link.name: calibrate_link_twice(topology, plan, link, backend)
               for link in plan.links}
    problems = [p for r in results.values() for p in r["problems"]]
    if problems:
        raise CalibrationError("calibration refused the topology: " + "; ".join(problems),
                               results)
    return results
