"""Measured vs configured RTT and rate per link, right after bring-up; refusal past tolerance.

An emulator only adds delay, and on a given machine it cannot forward faster than its
threads wake up: a link's RTT is what was configured plus that floor. So each link's probes
alternate with probes of its floor, an unshaped copy of the same path (same backend, same
emulator scheduling) between two throwaway network namespaces, and the link is accepted
within [configured - tolerance, configured + floor + tolerance] (Bounds).
"""

from __future__ import annotations

import json
import math
import os
import select
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from clients.paths import binary
from harness.procs import die_with_parent
from harness.topology.addressing import (
    CALIBRATION_NET,
    FLOOR_LINK_INDEX,
    AddressPlan,
    LinkPlan,
    link_mac,
)
from harness.topology.backends import BACKENDS, EMULATOR_IO
from harness.topology.commands import (
    LINK_LAYER_BYTES,
    NETNS_DIR,
    PairEnd,
    linkem_options,
    ns_exec,
    xdp_neighbour_command,
    xdp_pair_commands,
)
from harness.topology.model import MTU_BYTES, Link, Topology, TopologyError

AGENT = Path(__file__).with_name("rtt_agent.py")
PINGS, CONNECTS = 20, 10
# About this many probes in flight at once (each timed by the kernel alone): a 100 ms link's
# 30 probes take about 1 s, not 3 s
PROBES_IN_FLIGHT = 4
RTT_TOLERANCE_FRACTION, RTT_TOLERANCE_MS = 0.01, 0.2
RATE_TOLERANCE_FRACTION = 0.05
TCP_IP_HEADER_BYTES = 52  # IPv4 20 + TCP 20 + timestamps 12
PROBE_PACKET_BYTES = 60  # a SYN with options, or a ping byte with its headers
# The floor path lives in namespaces nobody else sees, addressed from the addressing
# module's block for it (in the benchmarking range, as every address wanbench gives out).
FLOOR_DEVICES = ("wbfloora", "wbfloorb")
FLOOR_ADDRESSES = tuple(str(address) for address in CALIBRATION_NET.hosts())
FLOOR_PREFIXLEN = CALIBRATION_NET.prefixlen
START_TIMEOUT_S = 30.0  # an interpreter starts in seconds on an emulated CPU (a TCG guest)


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


def expected_goodput_bps(rate_mbit: float, wiring: str) -> float:
    """What TCP can carry over a rate limit: payload share of each full-sized packet."""
    per_packet = MTU_BYTES + LINK_LAYER_BYTES[wiring]
    return rate_mbit * 1e6 * (MTU_BYTES - TCP_IP_HEADER_BYTES) / per_packet


def rate_measurable(spec: Link, direction: str) -> bool:
    """Bulk TCP shows the rate only without random loss or reordering jitter on its path."""
    shaping = spec.direction(direction)
    return bool(shaping.rate_mbit) and not (shaping.loss_pct or shaping.jitter_ms)


def bulk_seconds(rtt_ms: float) -> float:
    return max(1.5, 30 * rtt_ms / 1000)


@dataclass(frozen=True)
class Ends:
    """The two ends of a measured path: how to run a command in each end's namespace (a
    command that exec()s it: ip netns exec, nsenter), a's namespace file, b's address."""

    enter_a: list[str]
    enter_b: list[str]
    netns_a: str
    b_addr: str
    what: str


def _agent(enter: list[str], *args: str) -> list[str]:
    return [*enter, sys.executable, str(AGENT), *args]


def _child(argv: list[str], **kwargs) -> subprocess.Popen:
    """A helper that dies with this process, SIGKILL included (the parent-death signal
    survives the exec of ip netns exec and nsenter): a killed runner must not leave an agent
    holding a namespace that `topo clean` has deleted."""
    return subprocess.Popen(argv, preexec_fn=die_with_parent, **kwargs)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=START_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _first_line(proc: subprocess.Popen) -> str:
    """The process's first line of output, or '' if none comes in time."""
    ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT_S)
    return proc.stdout.readline().strip() if ready else ""


def _serve(stack: ExitStack, path: Ends) -> str:
    """Starts the agent's server at path's b end; returns its port."""
    server = _child(_agent(path.enter_b, "serve", "--bind", path.b_addr),
                    stdout=subprocess.PIPE, text=True)
    stack.callback(_stop, server)
    port = _first_line(server)
    if not port:
        raise CalibrationError(f"{path.what}: measurement agent did not start", {})
    return port


def probe_rtt_ms(spec: Link) -> float:
    """The round trip a probe should measure: the link's, plus its probe packet's time at a
    rate limit, once each way."""
    return spec.rtt_ms() + sum(PROBE_PACKET_BYTES * 8 / (spec.direction(d).rate_mbit * 1e3)
                               for d in ("a_to_b", "b_to_a") if spec.direction(d).rate_mbit)


def probe_interval_s(spec: Link) -> float:
    """From one probe to the next: the probes' round trip shared among PROBES_IN_FLIGHT, and
    no less than two probe packets' time at the link's slowest rate (so that none waits
    behind another's packets there: only its own time, which probe_rtt_ms counts)."""
    rates = [rate for d in ("a_to_b", "b_to_a") if (rate := spec.direction(d).rate_mbit)]
    serialise_s = 2 * PROBE_PACKET_BYTES * 8 / (min(rates) * 1e6) if rates else 0.0
    return max(probe_rtt_ms(spec) / 1000 / PROBES_IN_FLIGHT, serialise_s)


def measure(path: Ends, floor: Ends, upload_s: float = 0.0, download_s: float = 0.0,
            interval_s: float = 0.0) -> dict:
    """Connect and ping-pong RTTs across path, a probe every interval_s, each followed by one
    across floor (so both see the machine in the same moments: its load comes in bursts),
    then bulk goodput across path. The floor's samples are under "floor"."""
    with ExitStack() as stack:
        port, floor_port = _serve(stack, path), _serve(stack, floor)
        out = subprocess.run(
            _agent(path.enter_a, "measure", "--host", path.b_addr, "--port", port,
                   "--pings", str(PINGS), "--connects", str(CONNECTS),
                   "--in-flight", str(PROBES_IN_FLIGHT), "--interval-us", str(interval_s * 1e6),
                   "--upload-s", str(upload_s), "--download-s", str(download_s),
                   "--pair-netns", floor.netns_a, "--pair-host", floor.b_addr,
                   "--pair-port", floor_port),
            capture_output=True, text=True, timeout=30 + upload_s + download_s,
            preexec_fn=die_with_parent)
    if out.returncode != 0:
        raise CalibrationError(f"{path.what}: measurement failed: {out.stderr.strip()}", {})
    return json.loads(out.stdout)


def link_path(plan: AddressPlan, link: LinkPlan) -> Ends:
    ns_a, ns_b = plan.hosts[link.a].netns, plan.hosts[link.b].netns
    return Ends(ns_exec(ns_a, []), ns_exec(ns_b, []), str(NETNS_DIR / ns_a), link.b_addr,
                f"link {link.name}")


# ---- the floor: the same path without shaping ----

def _enter(holder: subprocess.Popen) -> list[str]:
    return ["nsenter", f"--net=/proc/{holder.pid}/ns/net", "--"]


def _scratch_netns(stack: ExitStack) -> subprocess.Popen:
    """A process alone in a new network namespace; the namespace goes when it does (it dies
    with us), so a killed calibration leaves nothing for `topo clean` to find."""
    holder = _child(["unshare", "--net", "sh", "-c", "echo ready; exec sleep infinity"],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stack.callback(_stop, holder)
    # Printed after unshare(): until then /proc/PID/ns/net would be our own namespace.
    if _first_line(holder) != "ready" or (os.stat(f"/proc/{holder.pid}/ns/net").st_ino
                                          == os.stat("/proc/self/ns/net").st_ino):
        raise CalibrationError("floor: could not create a scratch network namespace: "
                               f"{holder.stderr.read() if holder.poll() is not None else ''}",
                               {})
    return holder


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise CalibrationError(f"floor: `{' '.join(argv)}` failed: {done.stderr.strip()}", {})


def _emulator_argv(spec: Link, io: str, ns_a: int, ns_b: int, stats: Path) -> list[str]:
    """wb-linkem as the link runs it (I/O, scheduling, busy-polling, offloads), with no
    shaping."""
    return [str(binary("wb-linkem")),
            "--a-netns", f"/proc/{ns_a}/ns/net", "--a-dev", FLOOR_DEVICES[0],
            "--b-netns", f"/proc/{ns_b}/ns/net", "--b-dev", FLOOR_DEVICES[1],
            "--stats", str(stats), *linkem_options(spec, io)]


def _floor_wire(stack: ExitStack, spec: Link, backend: str, a: subprocess.Popen,
                b: subprocess.Popen) -> str:
    """Joins the two namespaces as the backend joins a link's ends; returns what it is."""
    io = EMULATOR_IO.get(BACKENDS[backend].wiring(spec))
    if io is None:
        _run([*_enter(a), "ip", "link", "add", FLOOR_DEVICES[0], "type", "veth", "peer",
              "name", FLOOR_DEVICES[1], "netns", str(b.pid)])
        return "veth pair"
    if io == "xdp":
        ends = [PairEnd([*_enter(holder), "ip"], str(holder.pid), dev,
                        link_mac(FLOOR_LINK_INDEX, side), addr)
                for holder, dev, side, addr in ((a, FLOOR_DEVICES[0], "a", FLOOR_ADDRESSES[0]),
                                                (b, FLOOR_DEVICES[1], "b", FLOOR_ADDRESSES[1]))]
        for side, far in ((ends[0], ends[1]), (ends[1], ends[0])):
            for argv in (*xdp_pair_commands(side, far), xdp_neighbour_command(side, far)):
                _run(argv)
    stats = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "floor.json"
    argv = _emulator_argv(spec, io, a.pid, b.pid, stats)
    emulator = _child(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stack.callback(_stop, emulator)
    if _first_line(emulator) != "ready":
        _stop(emulator)
        raise CalibrationError(f"floor: wb-linkem did not start: {emulator.stderr.read()}", {})
    return f"wb-linkem {argv[argv.index('--sched') + 1]}, unshaped, {io} I/O"


@contextmanager
def floor_path(spec: Link, backend: str) -> Iterator[tuple[Ends, str]]:
    """An unshaped copy of the link's path (same backend, same emulator scheduling) between
    two throwaway namespaces; yields its ends and what joins them."""
    with ExitStack() as stack:
        a, b = _scratch_netns(stack), _scratch_netns(stack)
        wire = _floor_wire(stack, spec, backend, a, b)
        for holder, dev, addr in ((a, FLOOR_DEVICES[0], FLOOR_ADDRESSES[0]),
                                  (b, FLOOR_DEVICES[1], FLOOR_ADDRESSES[1])):
            _run([*_enter(holder), "ip", "addr", "add", f"{addr}/{FLOOR_PREFIXLEN}", "dev", dev])
            _run([*_enter(holder), "ip", "link", "set", dev, "up"])
        yield Ends(_enter(a), _enter(b), f"/proc/{a.pid}/ns/net", FLOOR_ADDRESSES[1],
                   "floor"), wire


def floor_summary(samples: dict, wire: str) -> dict:
    """The floor as the manifest records it: median RTTs across the unshaped path."""
    return {"ping_rtt_median_ms": statistics.median(samples["ping_ms"]),
            "connect_rtt_median_ms": statistics.median(samples["connect_ms"]),
            "samples": {"ping": len(samples["ping_ms"]), "connect": len(samples["connect_ms"])},
            "path": f"{wire} between two scratch namespaces, probed alternately with the link"}


@dataclass(frozen=True)
class Bounds:
    """Accepted RTTs: the median no lower than configured - tolerance (an emulator cannot
    take delay away); no higher than configured + floor + tolerance, judged on the fastest
    probe when the link does not jitter (what delays a probe besides the link, wake-ups, a
    busy CPU's scheduler tick, a stall, only ever adds, while a delay the link adds is in
    every probe), else on the median (jitter spreads the probes by design)."""

    configured: float
    floor: float
    tolerance: float
    jitters: bool

    def problem(self, name: str, kind: str, samples: list[float]) -> str | None:
        """What was measured against what, and what would fix it; None within bounds."""
        median, fastest = statistics.median(samples), min(samples)
        low, high = self.configured - self.tolerance, self.configured + self.floor + self.tolerance
        judged, what = (median, "the median") if self.jitters else (
            fastest, f"the fastest of {len(samples)} probes")
        numbers = (f"link {name}: {kind} RTT median {median:.3f} ms vs configured "
                   f"{self.configured:.3f} ms (fastest {fastest:.3f} ms; floor {self.floor:.3f} "
                   "ms, measured on the same path unshaped; tolerance "
                   f"±{self.tolerance:.3f} ms)")
        if median < low:
            return (f"{numbers}: the median is below {low:.3f} ms, the link delays less than "
                    "configured, which an emulator applying the delay cannot do; fix: check "
                    "the backend's commands (`wanbench topo up --dry-run`) and the emulator")
        if judged > high:
            return (f"{numbers}: {what} is above {high:.3f} ms, the link adds "
                    f"{judged - self.configured - self.floor:.3f} ms beyond its configuration "
                    "and the floor; fix: if the emulator's lateness below shows stalls, the "
                    "machine was busy: rerun when other load has ended; otherwise the link is "
                    "not shaped as configured")
        return None


def judge(name: str, spec: Link, backend: str, raw: dict, floor: dict | None = None) -> dict:
    """Compares an agent's measurements of link `name` with its configuration, given the
    floor (floor_summary) of the same path unshaped; None: judged as if the floor were 0."""
    configured = probe_rtt_ms(spec)
    sigma = jitter_sigma_ms(spec)
    tolerance = rtt_tolerance_ms(configured, sigma, len(raw["ping_ms"]))
    result = {
        "configured_rtt_ms": configured,
        "ping_rtt_median_ms": statistics.median(raw["ping_ms"]),
        "connect_rtt_median_ms": statistics.median(raw["connect_ms"]),
        "ping_rtt_fastest_ms": min(raw["ping_ms"]),
        "connect_rtt_fastest_ms": min(raw["connect_ms"]),
        "rtt_tolerance_ms": tolerance,
        "floor": floor,
        "upper_bound_on": "median" if sigma else "fastest probe",
        "samples": {"ping": len(raw["ping_ms"]), "connect": len(raw["connect_ms"])},
        "rate": {},
        "problems": [],
    }
    for kind in ("ping", "connect"):
        result[f"{kind}_rtt_error_ms"] = result[f"{kind}_rtt_median_ms"] - configured
        bounds = Bounds(configured, floor[f"{kind}_rtt_median_ms"] if floor else 0.0, tolerance,
                        bool(sigma))
        problem = bounds.problem(name, kind, raw[f"{kind}_ms"])
        if problem:
            result["problems"].append(problem)
    for direction, key in (("a_to_b", "upload_bps"), ("b_to_a", "download_bps")):
        rate = spec.direction(direction).rate_mbit
        if not rate:
            continue
        if not rate_measurable(spec, direction):
            result["rate"][direction] = {"configured_mbit": rate, "judged": False,
                                         "why": "loss or jitter: TCP goodput is not the rate"}
            continue
        expected = expected_goodput_bps(rate, BACKENDS[backend].wiring(spec))
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
    with floor_path(spec, backend) as (floor, wire):
        raw = measure(link_path(plan, link), floor,
                      seconds if rate_measurable(spec, "a_to_b") else 0.0,
                      seconds if rate_measurable(spec, "b_to_a") else 0.0,
                      probe_interval_s(spec))
    return judge(link.name, spec, backend, raw, floor_summary(raw["floor"], wire))


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
