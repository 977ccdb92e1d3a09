"""`make bench-wan`: docs/bench-wan.md from the newest run of scenarios/bench/bench-wan.yaml.

The Makefile measures with `wanbench run` (one link, plain veth against the userspace
emulator over AF_XDP and over TUN devices, five loads: small packets in a closed loop, in an
open loop, in the closed loop with each host's receive work on its own CPU, one bulk stream,
and a 50 ms RTT link; the arms alternating round by round); this script only reads the run
and writes the report, so `--run` re-renders a stored one without measuring.

    .venv/bin/python topologies/bench_wan.py [--results results/bench] [--run RUN_DIR]
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.analysis import benchpage
from harness.results.runset import RunSet
from harness.topology.backends import USERSPACE, XDP

SCENARIO = "bench-wan"
# The goals for the AF_XDP path, on two CPUs
RATE_GOAL = 0.8  # of veth's closed-loop rate
CPU_GOAL_US = 1.0  # of the emulator's CPU per packet in that loop
RTT_GOAL_PCT = 1.0  # error of the median RTT at 50 ms
WAN_RTT_MS = 50.0
# a round is quiet when the hypervisor took at most this much of the CPUs in each of its runs
# (other tasks on the server's CPU cannot tell: the emulator is one of them)
QUIET_STEAL_PCT = 1
CPUS = 2  # the server's and the generator's: the emulator has none of its own
BULK_REPLY_BYTES = 1 << 20  # replies this large make a run the bulk stream
CLOSED, OPEN, BULK = "small packets, closed loop", "small packets, open loop", "bulk"
OWN_CPU = "small packets, closed loop, each host's receive on its own CPU"
WAN = "50 ms RTT"
PATHS = {XDP.name: "AF_XDP", USERSPACE.name: "TUN"}  # the emulator's arms, by backend
VETH, XDP_BUSY, XDP_ARM, TUN = "veth", "AF_XDP, busy_poll_us 200", "AF_XDP", "TUN"
ARMS = (VETH, XDP_BUSY, XDP_ARM, TUN)  # the tables' order


def arm(row: pd.Series) -> str:
    path = PATHS.get(row["topology_backend"])
    if path is None:
        return VETH  # busy_poll_us is the emulator's: veth has none
    busy = row["links_lan_busy_poll_us"]
    return f"{path}, busy_poll_us {busy}" if busy else path


def load(row: pd.Series) -> str:
    if row["links_lan_delay_ms"]:
        return WAN
    if pd.notna(row["offered_rate_rps"]):
        return OPEN
    if row["reply_bytes"] >= BULK_REPLY_BYTES:
        return BULK
    return OWN_CPU if row["hosts_server_stack_receive_on_own_cpu"] else CLOSED


def runs_frame(points: pd.DataFrame) -> pd.DataFrame:
    """One row per run, in the order measured (round by round), with its load and arm, its
    packet rates, goodput, the CPU each party spent per request, and what others took."""
    out = points.assign(arm=points.apply(arm, axis=1), load=points.apply(load, axis=1))
    window = out["sampled_window_s"]
    packets = out["packets_in"] + out["packets_out"]
    out["pps_in"] = out["packets_in"] / window
    out["pps_out"] = out["packets_out"] / window
    out["goodput_gbit"] = out["bytes_out"] * 8 / window / 1e9  # server to client: the replies
    emulator = out["cpu_emulator_pct"].fillna(0.0)
    out["emulator_us_per_packet"] = (out["cpu_emulator_pct"] / 100 * window * 1e6
                                     / packets.where(packets > 0))
    # The machine's busy CPU, both CPUs (100 % = one): what the server, the generator and
    # the emulator ran, and the rest (softirq outside them, kernel threads, anyone else).
    out["busy_pct"] = (CPUS * 100 - out["cpu_idle_pct"] - out["idle_generator_cpu_pct"]
                       ).clip(lower=0)
    out["other_pct"] = (out["busy_pct"] - out["cpu_server_pct"] - out["cpu_generator_pct"]
                        - emulator).clip(lower=0)
    rate = out["reply_rate_rps"].where(out["reply_rate_rps"] > 0)
    for party, pct in (("server", out["cpu_server_pct"]), ("generator", out["cpu_generator_pct"]),
                       ("emulator", emulator), ("other", out["other_pct"]),
                       ("busy", out["busy_pct"])):
        out[f"{party}_us_per_request"] = pct / 100 * 1e6 / rate
    rank = out["arm"].map({a: i for i, a in enumerate(ARMS)})
    return (out.assign(rank=rank).sort_values(["repetition", "load", "rank"])
            .drop(columns="rank").reset_index(drop=True))


def num(value: float, digits: int = 0) -> str:
    return "–" if pd.isna(value) else f"{value:,.{digits}f}"


def beside(run: pd.Series) -> str:
    """The load and steal a run measured beside: CPU time neither the server, the generator
    nor the emulator ran (both CPUs, 100 % = one), and the hypervisor's."""
    return f"others {num(run['other_pct'])} %, steal {num(run['steal_pct'], 1)} %"


def run_table(runs: pd.DataFrame) -> list[str]:
    lines = ["| round | load | arm | req/s | Gbit/s | server pkt/s in | server pkt/s out | "
             "emulator CPU % | emulator µs/packet | CPU 0 idle % | CPU 1 idle % | others % | "
             "steal % |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for _, r in runs.iterrows():
        lines.append(f"| {r['repetition'] + 1} | {r['load']} | {r['arm']} | "
                     f"{num(r['reply_rate_rps'])} | {num(r['goodput_gbit'], 2)} | "
                     f"{num(r['pps_in'])} | {num(r['pps_out'])} | {num(r['cpu_emulator_pct'])} "
                     f"| {num(r['emulator_us_per_packet'], 2)} | {num(r['cpu_idle_pct'])} | "
                     f"{num(r['idle_generator_cpu_pct'])} | {num(r['other_pct'])} | "
                     f"{num(r['steal_pct'], 1)} |")
    return lines


def over_veth_by_round(runs: pd.DataFrame, column: str, which: str) -> str:
    """Each run of arm `which` over the median veth run of its round, with the load and steal
    beside it; * marks a round with steal over QUIET_STEAL_PCT in a run."""
    pairs, shown = [], []
    for _, rnd in runs.groupby("repetition"):
        veth = rnd.loc[rnd["arm"] == VETH, column].median()
        quiet = (rnd["steal_pct"] <= QUIET_STEAL_PCT).all()
        for _, run in rnd[rnd["arm"] == which].iterrows():
            pairs.append((run[column] / veth, quiet))
            shown.append(f"{run[column] / veth:.0%}{'' if quiet else '*'} ({beside(run)})")
    calm = [p for p, q in pairs if q]
    calm_note = (f", {pd.Series(calm).median():.0%} over the {len(calm)} without *"
                 if calm and len(calm) < len(pairs) else "")
    return (f"{which} over the median veth run of the same round, round by round: "
            f"{'; '.join(shown)}; median {pd.Series([p for p, _ in pairs]).median():.0%}"
            f"{calm_note}.")


def comparison(runs: pd.DataFrame, column: str = "reply_rate_rps",
               unit: str = "req/s", digits: int = 0) -> list[str]:
    """Median of `column` per arm against veth's, and the arms round by round."""
    arms = [a for a in ARMS if a in set(runs["arm"])]
    medians = runs.groupby("arm")[column].median()
    veth = medians[VETH]
    lines = [f"| arm | runs | median {unit} | over veth |", "|---|---|---|---|"]
    lines += [f"| {a} | {int((runs['arm'] == a).sum())} | {num(medians[a], digits)} | "
              f"{medians[a] / veth:.1%} |" for a in arms]
    lines.append("")
    for a in arms[1:]:
        lines += [over_veth_by_round(runs, column, a), ""]
    lines.append(f"* = CPU steal over {QUIET_STEAL_PCT} % in a run of that round.")
    return lines


def cpu_table(runs: pd.DataFrame) -> list[str]:
    """Medians per arm: where each request's CPU went, and what the machine had left."""
    lines = ["| arm | req/s | server µs/req | generator µs/req | emulator µs/req | other µs/req "
             "| machine busy µs/req | emulator µs/packet | CPU 0 idle % | CPU 1 idle % | "
             "p50 / p99 ms |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    medians = runs.groupby("arm").median(numeric_only=True)
    for a in (a for a in ARMS if a in medians.index):
        m = medians.loc[a]
        latency = (f"{num(m['resp_time_uncorrected_p50_ms'], 3)} / "
                   f"{num(m['resp_time_uncorrected_p99_ms'], 3)}")
        lines.append(f"| {a} | {num(m['reply_rate_rps'])} | {num(m['server_us_per_request'], 1)}"
                     f" | {num(m['generator_us_per_request'], 1)} | "
                     f"{num(m['emulator_us_per_request'], 1)} | "
                     f"{num(m['other_us_per_request'], 1)} | {num(m['busy_us_per_request'], 1)}"
                     f" | {num(m['emulator_us_per_packet'], 2)} | {num(m['cpu_idle_pct'])} | "
                     f"{num(m['idle_generator_cpu_pct'])} | {latency} |")
    return lines


def wan_rtts(manifest: dict) -> dict[str, list[float]]:
    """The 50 ms link's median ping RTT at each bring-up of each path (its calibration)."""
    found: dict[str, list[float]] = {}
    for instance in manifest["topology"].get("instances", []):
        cal = (instance.get("calibration") or {}).get("lan") or {}
        if cal.get("configured_rtt_ms") == WAN_RTT_MS and instance["backend"] in PATHS:
            found.setdefault(PATHS[instance["backend"]], []).append(cal["ping_rtt_median_ms"])
    return found


def rtt_error_pct(rtts: list[float]) -> float:
    """The worst bring-up's error of its median RTT against the configured 50 ms."""
    return max(abs(r - WAN_RTT_MS) for r in rtts) / WAN_RTT_MS * 100


@dataclass(frozen=True)
class Goals:
    """The issue's three goals for the AF_XDP path, as this run measured them."""

    rate_ratio: float  # AF_XDP's median closed-loop rate over veth's
    busy_rate_ratio: float  # the same, busy-polling
    cpu_us: float  # AF_XDP's emulator CPU per packet in that loop (median)
    busy_cpu_us: float
    rtt_error_pct: float | None  # worst of its 50 ms bring-ups; None: none measured
    tun_rtt_error_pct: float | None

    def verdicts(self) -> list[str]:
        def met(ok: bool) -> str:
            return "met" if ok else "NOT met"

        best = max(self.rate_ratio, self.busy_rate_ratio)
        cheapest = min(self.cpu_us, self.busy_cpu_us)
        rtt = ("not measured" if self.rtt_error_pct is None else
               f"{self.rtt_error_pct:.2f} % (TUN: {num(self.tun_rtt_error_pct, 2)} %) | "
               f"{met(self.rtt_error_pct <= RTT_GOAL_PCT)}")
        return [
            "| goal (AF_XDP, two CPUs) | measured | verdict |", "|---|---|---|",
            f"| closed-loop rate ≥ {RATE_GOAL:.0%} of veth's | {self.rate_ratio:.1%}, "
            f"busy-polling {self.busy_rate_ratio:.1%} | {met(best >= RATE_GOAL)} |",
            f"| emulator CPU ≤ {CPU_GOAL_US:.0f} µs per packet (closed loop) | "
            f"{self.cpu_us:.2f} µs, busy-polling {self.busy_cpu_us:.2f} µs | "
            f"{met(cheapest <= CPU_GOAL_US)} |",
            f"| RTT error at {WAN_RTT_MS:.0f} ms ≤ {RTT_GOAL_PCT:.0f} % | {rtt} |"]


def goals(closed: pd.DataFrame, manifest: dict) -> Goals:
    m = closed.groupby("arm").median(numeric_only=True)
    rtts = wan_rtts(manifest)
    return Goals(m.loc[XDP_ARM, "reply_rate_rps"] / m.loc[VETH, "reply_rate_rps"],
                 m.loc[XDP_BUSY, "reply_rate_rps"] / m.loc[VETH, "reply_rate_rps"],
                 m.loc[XDP_ARM, "emulator_us_per_packet"],
                 m.loc[XDP_BUSY, "emulator_us_per_packet"],
                 rtt_error_pct(rtts[XDP_ARM]) if XDP_ARM in rtts else None,
                 rtt_error_pct(rtts[TUN]) if TUN in rtts else None)


@dataclass(frozen=True)
class OwnCost:
    """An emulator arm's CPU per packet, and how much of it is work veth does too."""

    total_us: float  # the emulator's CPU per packet it forwarded
    moved_us: float  # by how much the server's and wrk's CPU per packet fell against veth's
    machine_us: float  # by how much the whole machine's busy time per packet grew

    @property
    def own_us(self) -> float:
        return self.total_us - self.moved_us


def own_cost(closed: pd.DataFrame, which: str) -> OwnCost:
    """In the closed loop: the emulator's CPU per packet, less the receiving stack's work
    that its send runs (veth runs it in the sender's transmit)."""
    c = closed.groupby("arm").median(numeric_only=True)
    veth, ours = c.loc[VETH], c.loc[which]
    per_request = (ours["pps_in"] + ours["pps_out"]) / ours["reply_rate_rps"]

    def endpoints_us(m: pd.Series) -> float:
        return (m["server_us_per_request"] + m["generator_us_per_request"]) / per_request

    return OwnCost(ours["emulator_us_per_packet"], endpoints_us(veth) - endpoints_us(ours),
                   (ours["busy_us_per_request"] - veth["busy_us_per_request"]) / per_request)


def own_cost_lines(closed: pd.DataFrame, open_loop: pd.DataFrame) -> list[str]:
    o = open_loop.groupby("arm").median(numeric_only=True)
    xdp, tun = own_cost(closed, XDP_ARM), own_cost(closed, TUN)
    return [
        "**The emulator's own cost.** In the closed loop the emulator ran "
        f"{num(xdp.total_us, 2)} µs of CPU per packet it forwarded over AF_XDP and "
        f"{num(tun.total_us, 2)} µs over TUN devices. Part of that is work veth does too, on "
        "the sender's CPU: the emulator's send (a TUN write, or the sendto that has the "
        "kernel transmit an AF_XDP batch) delivers each packet into the receiver's TCP input, "
        "as veth's transmit does. The server's and wrk's CPU per packet fell by "
        f"{num(xdp.moved_us, 2)} µs (AF_XDP) and {num(tun.moved_us, 2)} µs (TUN) against "
        f"veth's arm, which leaves {num(xdp.own_us, 2)} µs and {num(tun.own_us, 2)} µs per "
        "packet as the emulator's own. Over AF_XDP the fall understates what moved: the "
        "redirect of a host's own frames into the UMEM (veth's NAPI, the XDP program, the "
        "copy) runs in that host's transmit, so it is the server's and wrk's CPU. The "
        "machine as a whole, which counts all of it, was busy "
        f"{num(xdp.machine_us, 2)} µs (AF_XDP) and {num(tun.machine_us, 2)} µs (TUN) per "
        f"packet longer than with veth. At the open loop's fixed "
        f"{num(o.loc[XDP_ARM, 'reply_rate_rps'])} req/s, where fewer packets arrive per "
        f"wake-up, it ran {num(o.loc[XDP_ARM, 'emulator_us_per_packet'], 2)} µs per packet "
        f"over AF_XDP and {num(o.loc[TUN, 'emulator_us_per_packet'], 2)} µs over TUN, and a "
        f"reply took {num(o.loc[XDP_ARM, 'resp_time_uncorrected_p50_ms'], 3)} and "
        f"{num(o.loc[TUN, 'resp_time_uncorrected_p50_ms'], 3)} ms at the median against "
        f"veth's {num(o.loc[VETH, 'resp_time_uncorrected_p50_ms'], 3)} ms (the generator "
        "polls for its replies, so its CPU in the open loop says little).", ""]


def shortfall_lines(g: Goals, closed: pd.DataFrame, own_cpu: pd.DataFrame) -> list[str]:
    """Which goals this run missed and by how much, with what the run says of why."""
    lines = []
    best = max(g.rate_ratio, g.busy_rate_ratio)
    if best < RATE_GOAL:
        c = closed.groupby("arm").median(numeric_only=True)
        o = own_cpu.groupby("arm")["reply_rate_rps"].median()
        lines.append(
            f"**Rate.** AF_XDP kept {best:.1%} of veth's closed-loop rate, "
            f"{(RATE_GOAL - best) * 100:.1f} points short of {RATE_GOAL:.0%} (TUN: "
            f"{c.loc[TUN, 'reply_rate_rps'] / c.loc[VETH, 'reply_rate_rps']:.1%}). CPU 1, which "
            "wrk shares with the emulator, was idle "
            f"{num(c.loc[XDP_ARM, 'idle_generator_cpu_pct'])} % of the time and CPU 0 "
            f"{num(c.loc[XDP_ARM, 'cpu_idle_pct'])} % (veth: "
            f"{num(c.loc[VETH, 'idle_generator_cpu_pct'])} % and "
            f"{num(c.loc[VETH, 'cpu_idle_pct'])} %). With each host's receive work on its own "
            f"CPU, as on two machines, veth carried {num(o[VETH])} req/s and AF_XDP "
            f"{num(o[XDP_ARM])} ({o[XDP_ARM] / o[VETH]:.1%} of veth; TUN {num(o[TUN])}, "
            f"{o[TUN] / o[VETH]:.1%}): the gap is mostly veth running each packet's receive "
            "inline on the sender's CPU, which uses CPU 0's idle time, while the emulator, "
            "kept off the server's CPU, does the client's receive work on CPU 1.")
        lines.append("")
    cheapest = min(g.cpu_us, g.busy_cpu_us)
    if cheapest > CPU_GOAL_US:
        xdp, tun = own_cost(closed, XDP_ARM), own_cost(closed, TUN)
        lines.append(
            f"**CPU per packet.** The emulator ran {cheapest:.2f} µs per packet over AF_XDP, "
            f"{cheapest - CPU_GOAL_US:.2f} µs over the {CPU_GOAL_US:.0f} µs goal (TUN: "
            f"{num(tun.total_us, 2)} µs). At least {num(xdp.moved_us, 2)} µs of it is the "
            "receiving stack's work, which runs in the sendto that transmits a batch (a veth "
            "transmit runs it in the sender likewise). The system calls it saves are not what "
            "the time goes to: per packet the machine was busy "
            f"{num(xdp.machine_us, 2)} µs longer than with veth over AF_XDP and "
            f"{num(tun.machine_us, 2)} µs over TUN (copy mode on veth: an xdp_buff and a UMEM "
            "copy per frame received, an skb built per frame sent).")
        lines.append("")
    if g.rtt_error_pct is not None and g.rtt_error_pct > RTT_GOAL_PCT:
        lines.append(f"**RTT.** The median RTT at {WAN_RTT_MS:.0f} ms was off by "
                     f"{g.rtt_error_pct:.2f} %, {g.rtt_error_pct - RTT_GOAL_PCT:.2f} points "
                     f"over {RTT_GOAL_PCT:.0f} %.")
        lines.append("")
    return lines or ["Every goal met in this run.", ""]


def wan_lines(wan: pd.DataFrame, manifest: dict) -> list[str]:
    """The delayed link's RTT per bring-up and path; its emulator CPU per packet is mostly
    the polling that precedes each release (linkem.c: SPIN_NS before it is due)."""
    rtts = wan_rtts(manifest)
    m = wan.groupby("arm").median(numeric_only=True)
    lines = ["| path | bring-ups | median ping RTT per bring-up, ms | worst error | reply p50 / "
             "p99 ms at 500 req/s | emulator µs/packet |", "|---|---|---|---|---|---|"]
    for path in (XDP_ARM, TUN):
        if path not in rtts or path not in m.index:
            continue
        lines.append(f"| {path} | {len(rtts[path])} | "
                     f"{', '.join(f'{r:.3f}' for r in rtts[path])} | "
                     f"{rtt_error_pct(rtts[path]):.2f} % | "
                     f"{num(m.loc[path, 'resp_time_uncorrected_p50_ms'], 3)} / "
                     f"{num(m.loc[path, 'resp_time_uncorrected_p99_ms'], 3)} | "
                     f"{num(m.loc[path, 'emulator_us_per_packet'], 2)} |")
    return lines


def bulk_lines(bulk: pd.DataFrame) -> list[str]:
    m = bulk.groupby("arm").median(numeric_only=True)
    xdp, tun = m.loc[XDP_ARM], m.loc[TUN]
    return [
        f"Over AF_XDP the stream crossed at {num(xdp['goodput_gbit'], 2)} Gbit/s, frame by "
        f"frame (a veth whose peer runs XDP takes no GSO, and the host's device computes its "
        f"checksums), at {num(xdp['emulator_us_per_packet'], 2)} µs of emulator CPU per wire "
        f"packet; over TUN devices, whose offloads let a GSO segment of tens of packets cross "
        f"in one read and one write, at {num(tun['goodput_gbit'], 2)} Gbit/s and "
        f"{num(tun['emulator_us_per_packet'], 2)} µs per wire packet.", ""]


READING = [
    "## Reading", "",
    "AF_XDP: an XDP program on the far end of each host's veth pair redirects the host's "
    "frames to the emulator's AF_XDP socket there, whose receive ring the forwarding thread "
    "reads without a system call; due frames go out through the other socket's transmit "
    "ring, one sendto per batch (copy mode, all a veth offers: the kernel copies each frame "
    "into the ring on receipt and into an skb on transmit). The emulator's counters say how "
    "many system calls each direction made to receive and to send (`receive_calls`, "
    "`send_calls` in the run's manifest, topology.instances). TUN: a read() per packet and a "
    "write() per packet, with the kernel's offloads (topologies/README.md).", "",
    "Busy-polling: a thread that has just forwarded keeps polling its input for "
    "busy_poll_us before it sleeps, yielding between polls; over AF_XDP a poll is a read of "
    "the ring's producer index, no system call. The forwarding threads share CPU 1 with wrk, "
    "so the polling only uses time wrk leaves idle.", "",
]


def loaded(runs: pd.DataFrame, which: str) -> pd.DataFrame:
    return runs[runs["load"] == which]


def report(runs_given: RunSet) -> str:
    runs_set, manifest = benchpage.scenario_runs(runs_given, SCENARIO)
    runs = runs_frame(runs_set.points)
    closed, open_loop, own_cpu, bulk, wan = (loaded(runs, w)
                                             for w in (CLOSED, OPEN, OWN_CPU, BULK, WAN))
    first = closed.iloc[0]
    g = goals(closed, manifest)
    return "\n".join([
        "# bench-wan: the userspace link emulator over AF_XDP and TUN vs plain veth", "",
        benchpage.measured_line(manifest, runs_set.points) + " Generated by `make bench-wan`: "
        "scenarios/bench/bench-wan.yaml run by `wanbench run`, this page rendered "
        "by topologies/bench_wan.py.", "",
        f"topologies/lan.yaml; wb-server ({first['dispatch']}) pinned to CPU 0 in the server "
        f"namespace, the load pinned to CPU 1 in the client namespace, the emulator's threads "
        f"beside it (a run keeps them off the server's CPU), "
        f"{runs['sampled_window_s'].median():.0f} s measured per run after a warm-up; every "
        f"load and arm once per round, {runs['repetition'].nunique()} rounds in turn. Arms: "
        "plain veth; wb-linkem over AF_XDP (backend xdp), sleeping between bursts or "
        "busy-polling 200 µs; wb-linkem over TUN devices (backend userspace). Five loads: "
        f"small packets in a closed loop (wrk, {first['hot_conns']} connections, "
        f"{first['reply_bytes']}-byte replies: the rate the path allows), small packets in an "
        "open loop at a rate every arm carries (wb-sclient at a fixed rate: the path's cost "
        "shows as CPU and latency), the closed loop again with each host's receive work on its "
        f"own CPU, bulk (wrk over one connection fetching "
        f"{bulk['reply_bytes'].iloc[0] / (1 << 20):.0f} MB replies: one TCP stream's goodput), "
        "and a 50 ms RTT link (25 ms each way) at 500 req/s, whose bring-up calibration "
        "measures the RTT each path gives. Server packets/s are counted in the server's "
        "namespace (in = client to server); Gbit/s is the server's bytes out. Emulator CPU is "
        "the wb-linkem process (both forwarding threads, schedstat) over the window, 100 % = "
        "one core, busy-polling included, and per packet in + out. Beside each figure: "
        "others = the CPU time of both CPUs that neither the server, wrk nor the emulator ran "
        "(softirq outside them, kernel threads, other users), and steal = the hypervisor's. "
        "The emulator's threads run SCHED_BATCH on the unshaped link, SCHED_FIFO on the "
        "delayed one.", "",
        "## Goals", "", *g.verdicts(), "", *shortfall_lines(g, closed, own_cpu),
        f"## {CLOSED}", "", *comparison(closed), "",
        "Where each request's CPU went (medians; other = busy time of both CPUs that none of "
        "the three ran: softirq outside them, kernel threads; latency from each request's "
        "actual send):", "", *cpu_table(closed), "",
        f"## {OPEN}", "", *cpu_table(open_loop), "", *own_cost_lines(closed, open_loop),
        f"## {OWN_CPU}", "", "The same closed loop with receive_on_own_cpu on both hosts: "
        "each namespace's received packets are processed on the CPU its processes are pinned "
        "to (RPS), as on two machines, so veth no longer runs the server's TCP input on wrk's "
        "CPU.", "", *comparison(own_cpu), "", *cpu_table(own_cpu), "",
        f"## {BULK}", "", *comparison(bulk, "goodput_gbit", "Gbit/s", 2), "",
        *bulk_lines(bulk),
        f"## {WAN}", "", "Each bring-up of the delayed link is calibrated (harness/topology/"
        "calibrate.py): 20 pings across it, alternating with pings across an unshaped copy "
        "wired alike (the floor).", "", *wan_lines(wan, manifest), "",
        "At 1,000 packets/s the emulator's CPU per packet is mostly the 200 µs it polls "
        "before each release (a thread wakes that early because a VM's timer wake-ups run "
        "late), on either path.", "",
        *READING,
        "## Every run", "", *run_table(runs), "",
        "Every run counts in the medians whatever docs/validity.md says of it as a measurement "
        "of the server: this bench measures the path, and the emulator's threads share the "
        "server's and the generator's CPUs by design. The emulator's exit counters (system "
        "calls per direction, busy-poll pauses, the AF_XDP rings' drops) are in the run's "
        "manifest, topology.instances.", ""])


if __name__ == "__main__":
    raise SystemExit(benchpage.main(__doc__, "bench-wan", (SCENARIO,), report))
