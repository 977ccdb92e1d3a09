"""`make bench-wan`: docs/bench-wan.md from the newest run of scenarios/bench/bench-wan.yaml.

The Makefile measures with `wanbench run` (wrk's closed loop through one unshaped link, plain
veth against the userspace emulator with busy-polling on and off, the arms alternating round
by round); this script only reads the run and writes the report, so `--run` re-renders a
stored one without measuring.

    .venv/bin/python topologies/bench_wan.py [--results results/bench] [--run RUN_DIR]
"""

from __future__ import annotations

import pandas as pd

from harness.analysis import benchpage
from harness.results.runset import RunSet

SCENARIO = "bench-wan"
GOAL = 0.9  # the emulator, busy-polling, keeps at least 90 % of veth's rate
# a round is quiet when the hypervisor took at most this much of the CPUs in each of its runs
# (other tasks on the server's CPU cannot tell: the emulator is one of them)
QUIET_STEAL_PCT = 1


def arm(row: pd.Series) -> str:
    if row["topology_backend"] != "userspace":
        return "veth"  # busy_poll_us is the emulator's: veth has nothing to poll
    busy = row["links_lan_busy_poll_us"]
    return f"userspace, busy_poll_us {busy}" if busy else "userspace, default (no busy-poll)"


def runs_frame(points: pd.DataFrame) -> pd.DataFrame:
    """One row per run, in the order measured (round by round), with its arm."""
    out = points.assign(arm=points.apply(arm, axis=1))
    packets = out["packets_in"] + out["packets_out"]
    out["pps_in"] = out["packets_in"] / out["sampled_window_s"]
    out["pps_out"] = out["packets_out"] / out["sampled_window_s"]
    out["emulator_us_per_packet"] = (out["cpu_emulator_pct"] / 100 * out["sampled_window_s"]
                                     * 1e6 / packets.where(packets > 0))
    # veth first, then the emulator busy-polling, then as shipped: the old table's order
    rank = out["arm"].map(lambda a: 0 if a == "veth" else 1 if "busy_poll_us " in a else 2)
    return (out.assign(rank=rank).sort_values(["repetition", "rank", "links_lan_busy_poll_us"])
            .drop(columns="rank").reset_index(drop=True))


def num(value: float, digits: int = 0) -> str:
    return "–" if pd.isna(value) else f"{value:,.{digits}f}"


def run_table(runs: pd.DataFrame) -> list[str]:
    lines = ["| round | arm | req/s | server pkt/s in | server pkt/s out | emulator CPU % | "
             "emulator CPU µs/packet | server CPU idle % | other tasks on server CPU % | "
             "steal % | valid |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for _, r in runs.iterrows():
        lines.append(f"| {r['repetition'] + 1} | {r['arm']} | {num(r['reply_rate_rps'])} | "
                     f"{num(r['pps_in'])} | {num(r['pps_out'])} | {num(r['cpu_emulator_pct'])} "
                     f"| {num(r['emulator_us_per_packet'], 1)} | {num(r['cpu_idle_pct'])} | "
                     f"{num(r['other_server_cpu_pct'])} | {num(r['steal_pct'], 1)} | "
                     f"{'yes' if r['valid'] else 'no'} |")
    return lines


def comparison(runs: pd.DataFrame) -> list[str]:
    arms = list(dict.fromkeys(runs["arm"]))
    medians = runs.groupby("arm")["reply_rate_rps"].median()
    veth = medians["veth"]
    lines = ["| arm | runs | median req/s | over veth |", "|---|---|---|---|"]
    lines += [f"| {a} | {int((runs['arm'] == a).sum())} | {num(medians[a])} | "
              f"{medians[a] / veth:.1%} |" for a in arms]
    lines.append("")
    for a in arms[1:]:
        pairs = []
        for _, rnd in runs.groupby("repetition"):
            veth_rate = rnd.loc[rnd["arm"] == "veth", "reply_rate_rps"].median()
            ours = rnd.loc[rnd["arm"] == a, "reply_rate_rps"]
            quiet = (rnd["steal_pct"] <= QUIET_STEAL_PCT).all()
            pairs += [(rate / veth_rate, quiet) for rate in ours]
        shown = ", ".join(f"{p:.0%}" + ("" if q else "*") for p, q in pairs)
        calm = [p for p, q in pairs if q]
        calm_note = (f", {pd.Series(calm).median():.0%} over the {len(calm)} without *"
                     if calm and len(calm) < len(pairs) else "")
        lines += [f"{a} over the median veth run of the same round, round by round: {shown}; "
                  f"median {pd.Series([p for p, _ in pairs]).median():.0%}{calm_note}.", ""]
    busy = next((a for a in arms if "busy_poll_us " in a), None)
    if busy is not None:
        ratio = medians[busy] / veth
        lines.append(f"Goal: {busy} ≥ {GOAL:.0%} of veth: {ratio:.1%} "
                     f"({'met' if ratio >= GOAL else 'NOT met'}). * = CPU steal over "
                     f"{QUIET_STEAL_PCT} % in a run of that round.")
    return lines


def report(runs_given: RunSet) -> str:
    runs_set, manifest = benchpage.scenario_runs(runs_given, SCENARIO)
    runs = runs_frame(runs_set.points)
    first = runs.iloc[0]
    invalid = runs[~runs["valid"].astype(bool)]
    reasons = (["", f"{len(invalid)} of {len(runs)} runs are invalid as measurements of the "
                "server (docs/validity.md), e.g.: " + invalid["invalid_reason"].iloc[0] + ". "
                "This bench measures the path, not the server: the emulator's threads share "
                "the server's and wrk's CPUs by design, so every run counts in the medians."]
               if not invalid.empty else [])
    return "\n".join([
        "# bench-wan: userspace link emulator vs plain veth", "",
        benchpage.measured_line(manifest, runs_set.points) + " Generated by `make bench-wan`: "
        "scenarios/bench/bench-wan.yaml run by `wanbench run`, this page rendered "
        "by topologies/bench_wan.py.", "",
        f"topologies/lan.yaml; wb-server ({first['dispatch']}, {first['reply_bytes']}-byte "
        f"replies) pinned to CPU 0 in the server namespace, wrk's closed loop over "
        f"{first['hot_conns']} connections pinned to CPU 1 in the client namespace, "
        f"{runs['sampled_window_s'].median():.0f} s measured per run after a warm-up; the arms "
        "alternate round by round. Server packets/s are counted in the server's namespace (in ="
        " client to server); emulator CPU is the wb-linkem process (both forwarding threads, "
        "schedstat) over the window, 100 % = one core, busy-polling included, and per packet in"
        " + out. Server CPU idle and other tasks are of CPU 0. The emulator's threads run "
        "SCHED_BATCH on this unshaped link; busy_poll_us (off by default: the polling takes CPU"
        " from a saturated server, topologies/README.md) keeps them polling after the last "
        "packet instead of sleeping.", "",
        *run_table(runs), "", *comparison(runs), *reasons, "",
        "Reading: every packet costs the emulator a read and a write system call, two copies "
        "and an skb, and the write runs the receiver's TCP input (as veth's sender does). "
        "Without busy-polling the forwarding threads sleep between bursts: each burst waits "
        "for a sleeping thread's wake-up, on an idle, halted virtual CPU, and the requests "
        "move round the loop in convoys. With busy-polling the threads keep polling while "
        "traffic flows, yielding between polls, so they use CPU that would otherwise be idle. "
        "The emulator's threads are not pinned: with the server pinned to one CPU and wrk to "
        "the other they take turns with both (the other tasks on the server's CPU are mostly "
        "the emulator), which is what a pinned WAN scenario on two CPUs gets. Measured with "
        "nothing pinned, as this page was before it became a scenario (wrk and nginx "
        "wherever the scheduler put them), the busy-polling emulator kept 106 % of veth's "
        "rate and the default 62 %. The emulator's exit counters (packets per wake-up, "
        "busy-poll pauses) are in the run's manifest, topology.instances.", ""])


if __name__ == "__main__":
    raise SystemExit(benchpage.main(__doc__, "bench-wan", (SCENARIO,), report))
