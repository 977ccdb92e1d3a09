"""`make bench-wan`: docs/bench-wan.md from the newest run of scenarios/bench/bench-wan.yaml.

The Makefile measures with `wanbench run` (one unshaped link, plain veth against the userspace
emulator, three loads: small packets in a closed loop and in an open loop, one bulk stream;
the arms alternating round by round); this script only reads the run and writes the report,
so `--run` re-renders a stored one without measuring.

    .venv/bin/python topologies/bench_wan.py [--results results/bench] [--run RUN_DIR]
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.analysis import benchpage
from harness.results.runset import RunSet
from harness.topology.backends import USERSPACE

SCENARIO = "bench-wan"
GOAL = 0.9  # the emulator, busy-polling, keeps at least 90 % of veth's rate (issue #32)
# a round is quiet when the hypervisor took at most this much of the CPUs in each of its runs
# (other tasks on the server's CPU cannot tell: the emulator is one of them)
QUIET_STEAL_PCT = 1
CPUS = 2  # the server's and the generator's: the emulator has none of its own
BULK_REPLY_BYTES = 1 << 20  # replies this large make a run the bulk stream
CLOSED, OPEN, BULK = "small packets, closed loop", "small packets, open loop", "bulk"
OWN_CPU = "small packets, closed loop, each host's receive on its own CPU"
VETH, BUSY, DEFAULT, NO_OFFLOAD = ("veth", "userspace, busy_poll_us 200",
                                   "userspace, default", "userspace, offloads off")
ARMS = (VETH, BUSY, DEFAULT, NO_OFFLOAD)  # the tables' order


def arm(row: pd.Series) -> str:
    if row["topology_backend"] != USERSPACE.name:
        return VETH  # busy_poll_us and offloads are the emulator's: veth has neither
    if not row["links_lan_segmentation_offload"]:
        return NO_OFFLOAD
    busy = row["links_lan_busy_poll_us"]
    return f"userspace, busy_poll_us {busy}" if busy else DEFAULT


def load(row: pd.Series) -> str:
    if pd.notna(row["offered_rate_rps"]):
        return OPEN
    if row["reply_bytes"] >= BULK_REPLY_BYTES:
        return BULK
    return OWN_CPU if row["hosts_server_stack_receive_on_own_cpu"] else CLOSED


def runs_frame(points: pd.DataFrame) -> pd.DataFrame:
    """One row per run, in the order measured (round by round), with its load and arm, its
    packet rates, goodput, and the CPU each party spent per request."""
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


def run_table(runs: pd.DataFrame) -> list[str]:
    lines = ["| round | load | arm | req/s | Gbit/s | server pkt/s in | server pkt/s out | "
             "emulator CPU % | emulator µs/packet | CPU 0 idle % | CPU 1 idle % | steal % |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for _, r in runs.iterrows():
        lines.append(f"| {r['repetition'] + 1} | {r['load']} | {r['arm']} | "
                     f"{num(r['reply_rate_rps'])} | {num(r['goodput_gbit'], 2)} | "
                     f"{num(r['pps_in'])} | {num(r['pps_out'])} | {num(r['cpu_emulator_pct'])} "
                     f"| {num(r['emulator_us_per_packet'], 1)} | {num(r['cpu_idle_pct'])} | "
                     f"{num(r['idle_generator_cpu_pct'])} | {num(r['steal_pct'], 1)} |")
    return lines


def over_veth_by_round(runs: pd.DataFrame, column: str, which: str) -> str:
    """Each run of arm `which` over the median veth run of its round; * marks a round with
    steal over QUIET_STEAL_PCT in a run."""
    pairs = []
    for _, rnd in runs.groupby("repetition"):
        veth = rnd.loc[rnd["arm"] == VETH, column].median()
        quiet = (rnd["steal_pct"] <= QUIET_STEAL_PCT).all()
        pairs += [(value / veth, quiet) for value in rnd.loc[rnd["arm"] == which, column]]
    shown = ", ".join(f"{p:.0%}" + ("" if q else "*") for p, q in pairs)
    calm = [p for p, q in pairs if q]
    calm_note = (f", {pd.Series(calm).median():.0%} over the {len(calm)} without *"
                 if calm and len(calm) < len(pairs) else "")
    return (f"{which} over the median veth run of the same round, round by round: {shown}; "
            f"median {pd.Series([p for p, _ in pairs]).median():.0%}{calm_note}.")


def comparison(runs: pd.DataFrame, column: str = "reply_rate_rps",
               unit: str = "req/s", digits: int = 0, goal: bool = False) -> list[str]:
    """Median of `column` per arm against veth's, and the arms round by round; with `goal`,
    the goal's verdict (the issue's closed loop)."""
    arms = [a for a in ARMS if a in set(runs["arm"])]
    medians = runs.groupby("arm")[column].median()
    veth = medians[VETH]
    lines = [f"| arm | runs | median {unit} | over veth |", "|---|---|---|---|"]
    lines += [f"| {a} | {int((runs['arm'] == a).sum())} | {num(medians[a], digits)} | "
              f"{medians[a] / veth:.1%} |" for a in arms]
    lines.append("")
    for a in arms[1:]:
        lines += [over_veth_by_round(runs, column, a), ""]
    if goal:
        ratio = medians[BUSY] / veth
        lines.append(f"Goal: {BUSY} ≥ {GOAL:.0%} of veth: {ratio:.1%} "
                     f"({'met' if ratio >= GOAL else 'NOT met'}). * = CPU steal over "
                     f"{QUIET_STEAL_PCT} % in a run of that round.")
    return lines


def cpu_table(runs: pd.DataFrame) -> list[str]:
    """Medians per arm: where each request's CPU went, and what the machine had left."""
    lines = ["| arm | req/s | server µs/req | generator µs/req | emulator µs/req | other µs/req "
             "| machine busy µs/req | CPU 0 idle % | CPU 1 idle % | p50 / p99 ms |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    medians = runs.groupby("arm").median(numeric_only=True)
    for a in (a for a in ARMS if a in medians.index):
        m = medians.loc[a]
        latency = (f"{num(m['resp_time_uncorrected_p50_ms'], 3)} / "
                   f"{num(m['resp_time_uncorrected_p99_ms'], 3)}")
        lines.append(f"| {a} | {num(m['reply_rate_rps'])} | {num(m['server_us_per_request'], 1)}"
                     f" | {num(m['generator_us_per_request'], 1)} | "
                     f"{num(m['emulator_us_per_request'], 1)} | "
                     f"{num(m['other_us_per_request'], 1)} | {num(m['busy_us_per_request'], 1)}"
                     f" | {num(m['cpu_idle_pct'])} | {num(m['idle_generator_cpu_pct'])} | "
                     f"{latency} |")
    return lines


@dataclass(frozen=True)
class Gap:
    """The closed loop's gap between veth and the emulator as shipped, and how much of it a
    CPU of the emulator's own would close (each figure a median over the arm's runs)."""

    veth_rps: float
    emulator_rps: float
    server_us: float     # the server's CPU per request through the emulator
    generator_us: float  # the generator's
    emulator_us: float   # the emulator's (both threads)
    server_cpu_idle_pct: float     # CPU 0's idle time in the emulator's arm
    generator_cpu_idle_pct: float  # CPU 1's, where the emulator runs beside wrk
    veth_idle_pct: float  # both CPUs' idle time in veth's arm, 100 % = one CPU
    demand_pct: float    # the emulator's CPU at veth's packet rate, at its own cost per packet

    @property
    def third_cpu_rps(self) -> float:
        """The rate were the emulator on a CPU of its own: each party's CPU per request
        unchanged, the busiest of the three sets it; never above veth's."""
        return min(self.veth_rps, 1e6 / max(self.server_us, self.generator_us, self.emulator_us))

    @property
    def third_cpu_share(self) -> float:
        gap = self.veth_rps - self.emulator_rps
        closed = (self.third_cpu_rps - self.emulator_rps) / gap if gap > 0 else 0.0
        return min(1.0, max(0.0, closed))


def gap(closed: pd.DataFrame) -> Gap:
    m = closed.groupby("arm").median(numeric_only=True)
    veth, ours = m.loc[VETH], m.loc[DEFAULT]
    veth_pps = veth["pps_in"] + veth["pps_out"]
    return Gap(veth["reply_rate_rps"], ours["reply_rate_rps"], ours["server_us_per_request"],
               ours["generator_us_per_request"], ours["emulator_us_per_request"],
               ours["cpu_idle_pct"], ours["idle_generator_cpu_pct"],
               veth["cpu_idle_pct"] + veth["idle_generator_cpu_pct"],
               ours["emulator_us_per_packet"] * veth_pps / 1e4)


def own_cost_lines(closed: pd.DataFrame, open_loop: pd.DataFrame) -> list[str]:
    """The emulator's CPU per packet, less the work veth does too (on the sender's CPU)."""
    c = closed.groupby("arm").median(numeric_only=True)
    o = open_loop.groupby("arm").median(numeric_only=True)
    veth, ours = c.loc[VETH], c.loc[DEFAULT]
    per_request = (ours["pps_in"] + ours["pps_out"]) / ours["reply_rate_rps"]

    def endpoints_us(m: pd.Series) -> float:
        return (m["server_us_per_request"] + m["generator_us_per_request"]) / per_request

    moved = endpoints_us(veth) - endpoints_us(ours)
    own = ours["emulator_us_per_packet"] - moved
    machine = (ours["busy_us_per_request"] - veth["busy_us_per_request"]) / per_request
    return [
        f"**The emulator's own cost.** In the closed loop the emulator as shipped ran "
        f"{num(ours['emulator_us_per_packet'], 1)} µs of CPU per packet it forwarded. Part of "
        f"that is work veth does too, on the sender's CPU: the TUN write delivers the packet "
        f"into the receiver's TCP input, as veth's transmit does. The server's and wrk's CPU "
        f"fell by {num(moved, 1)} µs per packet against veth's arm, which leaves "
        f"{num(own, 1)} µs per packet as the emulator's own (a read and a write system call "
        f"each, the copies, its wake-ups); the machine as a whole was busy "
        f"{num(machine, 1)} µs per packet longer than with veth. At the open loop's fixed "
        f"{num(o.loc[DEFAULT, 'reply_rate_rps'])} req/s, where fewer packets arrive per "
        f"wake-up, it ran {num(o.loc[DEFAULT, 'emulator_us_per_packet'], 1)} µs per packet, "
        f"and a reply took {num(o.loc[DEFAULT, 'resp_time_uncorrected_p50_ms'], 3)} ms at the "
        f"median against veth's {num(o.loc[VETH, 'resp_time_uncorrected_p50_ms'], 3)} ms "
        f"(the generator polls for its replies, so its CPU in the open loop says little).", "",
    ]


def gap_lines(g: Gap) -> list[str]:
    return [
        f"**The missing third CPU.** In the closed loop the emulator as shipped kept "
        f"{num(g.emulator_rps)} req/s against veth's {num(g.veth_rps)}. The runner keeps "
        f"the emulator off the server's CPU, so that CPU 0 measures the server alone "
        f"(harness/runner/run.py, _place_network): on two CPUs it shares CPU 1 with wrk, "
        f"which was idle {num(g.generator_cpu_idle_pct)} % of the time while CPU 0 was idle "
        f"{num(g.server_cpu_idle_pct)} % (veth's arm: {num(g.veth_idle_pct)} % of a CPU idle "
        f"across both). At veth's packet rate the emulator would need "
        f"{num(g.demand_pct)} % of a CPU at the CPU per packet it spent in that loop: "
        f"{'more' if g.demand_pct > g.veth_idle_pct else 'less'} than the "
        f"{num(g.veth_idle_pct)} % veth's arm leaves idle. Per request it spent "
        f"{num(g.emulator_us, 1)} µs, the server {num(g.server_us, 1)} µs and wrk "
        f"{num(g.generator_us, 1)} µs; on a CPU of its own the busiest of the three would "
        f"set the rate at {num(g.third_cpu_rps)} req/s (at most veth's), which is "
        f"{g.third_cpu_share:.0%} of the gap. The rest, {1 - g.third_cpu_share:.0%}, is the "
        f"emulator's CPU per packet: at {num(g.emulator_us, 1)} µs per request one CPU of its "
        f"own carries at most {num(1e6 / g.emulator_us)} req/s (an estimate: it holds each "
        f"party's CPU per request as measured here, on two CPUs).", ""]


def bulk_lines(bulk: pd.DataFrame) -> list[str]:
    m = bulk.groupby("arm").median(numeric_only=True)
    on, off = m.loc[DEFAULT], m.loc[NO_OFFLOAD]
    return [
        f"With offloads the stream crossed the emulator at {num(on['goodput_gbit'], 2)} "
        f"Gbit/s, {on['goodput_gbit'] / off['goodput_gbit']:.1f} times its "
        f"{num(off['goodput_gbit'], 2)} Gbit/s one packet at a time; the emulator spent "
        f"{num(on['emulator_us_per_packet'], 2)} µs of CPU per wire packet against "
        f"{num(off['emulator_us_per_packet'], 2)} µs (a GSO segment is one read and one write "
        f"for tens of packets).", ""]


OFFLOADS_READING = [
    "## Reading", "",
    "Offloads: the emulator's TUNs take the kernel's checksum and TSO offloads and forward a "
    "GSO segment whole, shaping it as the wire packets it stands for (topologies/README.md); "
    "small packets gain nothing from it, one request or reply being one packet either way.", ""]
BATCHING_READING = [
    "Batching: a TUN gives one packet per read() and takes one per write(). Submitting the "
    "reads and writes to io_uring 16 at a time (IORING_OP_READV with RWF_NOWAIT, "
    "IORING_OP_WRITEV) was measured against this build, alternating, on the same loads, and "
    "dropped: in the closed loop it cost more CPU per packet and carried about half the rate "
    "(results/bench/linkem-uring/README.md, with the patch and the runs). Busy-polling, the "
    "other way to spare wake-ups, gains little here: the forwarding threads share a "
    "saturated CPU 1 with wrk, so there is no idle time for the polling to use.", "",
]


def where_work_runs(closed: pd.DataFrame, own_cpu: pd.DataFrame) -> list[str]:
    c = closed.groupby("arm")["reply_rate_rps"].median()
    o = own_cpu.groupby("arm")["reply_rate_rps"].median()
    return [
        "Small packets: where veth carries a packet, the sender's CPU runs the receiver's TCP "
        "input; through the emulator its forwarding thread does, on the generator's CPU, "
        "beside its own reads and writes. With each host's receive work on its own CPU, as two"
        f" machines would have it, veth's closed loop fell from {num(c[VETH])} to "
        f"{num(o[VETH])} req/s and the emulator's stayed at {num(o[DEFAULT])} as shipped "
        f"({o[DEFAULT] / o[VETH]:.0%} of veth) and {num(o[BUSY])} busy-polling "
        f"({o[BUSY] / o[VETH]:.0%}). Most of the first table's gap is veth running each "
        "packet's receive inline on the sender's CPU, with no hand-off, which neither two "
        "machines nor the emulator do.", ""]


def loaded(runs: pd.DataFrame, which: str) -> pd.DataFrame:
    return runs[runs["load"] == which]


def report(runs_given: RunSet) -> str:
    runs_set, manifest = benchpage.scenario_runs(runs_given, SCENARIO)
    runs = runs_frame(runs_set.points)
    closed, open_loop, own_cpu, bulk = (loaded(runs, w) for w in (CLOSED, OPEN, OWN_CPU, BULK))
    first = closed.iloc[0]
    g = gap(closed)
    return "\n".join([
        "# bench-wan: userspace link emulator vs plain veth", "",
        benchpage.measured_line(manifest, runs_set.points) + " Generated by `make bench-wan`: "
        "scenarios/bench/bench-wan.yaml run by `wanbench run`, this page rendered "
        "by topologies/bench_wan.py.", "",
        f"topologies/lan.yaml; wb-server ({first['dispatch']}) pinned to CPU 0 in the server "
        f"namespace, the load pinned to CPU 1 in the client namespace, the emulator's threads "
        f"beside it (a run keeps them off the server's CPU), "
        f"{runs['sampled_window_s'].median():.0f} s measured per run after a warm-up; every "
        "load and arm once per round, rounds in turn. Four loads: small packets in a closed "
        f"loop (wrk, {first['hot_conns']} connections, {first['reply_bytes']}-byte replies: the "
        "rate the path allows), small packets in an open loop at a rate every arm carries "
        "(wb-sclient at a fixed rate: the path's cost shows as CPU and latency), the closed "
        "loop again with each host's receive work on its own CPU, and bulk (wrk over one "
        f"connection fetching {bulk['reply_bytes'].iloc[0] / (1 << 20):.0f} MB replies: one TCP"
        " stream's goodput). Server packets/s"
        " are counted in the server's namespace (in = client to server); Gbit/s is the server's"
        " bytes out. Emulator CPU is the wb-linkem process (both forwarding threads, schedstat)"
        " over the window, 100 % = one core, busy-polling included, and per packet in + out. "
        "The emulator's threads run SCHED_BATCH on this unshaped link; busy_poll_us (off by "
        "default: the polling takes CPU from a saturated server, topologies/README.md) keeps "
        "them polling after the last packet instead of sleeping; offloads off is the emulator "
        "moving one packet per read and write (segmentation_offload: false), as it did before "
        "it took TSO.", "",
        f"## {CLOSED}", "", *comparison(closed, goal=True), "",
        "Where each request's CPU went (medians; other = busy time of both CPUs that none of "
        "the three ran: softirq outside them, kernel threads; latency from each request's "
        "actual send):", "", *cpu_table(closed), "",
        f"## {OPEN}", "", *cpu_table(open_loop), "", *own_cost_lines(closed, open_loop),
        *gap_lines(g),
        f"## {OWN_CPU}", "", "The same closed loop with receive_on_own_cpu on both hosts: "
        "each namespace's received packets are processed on the CPU its processes are pinned "
        "to (RPS), as on two machines, so veth no longer runs the server's TCP input on wrk's "
        "CPU.", "", *comparison(own_cpu), "", *cpu_table(own_cpu), "",
        f"## {BULK}", "", *comparison(bulk, "goodput_gbit", "Gbit/s", 2), "",
        *bulk_lines(bulk), *OFFLOADS_READING, *where_work_runs(closed, own_cpu),
        *BATCHING_READING,
        "## Every run", "", *run_table(runs), "",
        "Every run counts in the medians whatever docs/validity.md says of it as a measurement "
        "of the server: this bench measures the path, and the emulator's threads share the "
        "server's and the generator's CPUs by design. The emulator's exit counters (packets "
        "per wake-up, GSO reads, busy-poll pauses) are in the run's manifest, "
        "topology.instances.", ""])


if __name__ == "__main__":
    raise SystemExit(benchpage.main(__doc__, "bench-wan", (SCENARIO,), report))
