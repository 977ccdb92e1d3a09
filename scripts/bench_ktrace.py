"""`make bench-ktrace`: docs/bench-ktrace.md from the newest run of
scenarios/bench/bench-ktrace.yaml.

The Makefile measures with `wanbench run` (the quickstart's points, each with kernel_trace off
and on, side by side in every round); this script only reads the run and writes the page, so
`--runs` re-renders a stored one without measuring.

    .venv/bin/python scripts/bench_ktrace.py [--results results/bench] [--runs RUN_DIR]
"""

from __future__ import annotations

import pandas as pd

from harness.analysis import benchpage
from harness.results.format import kernel_column
from harness.results.runset import RunSet

SCENARIO = "bench-ktrace"
TARGET_PCT = 3.0  # the issue's target: at most 3 % fewer replies at 40,000 req/s
KEPT_UP = 0.99  # a point kept up with its offered load when it answered this share of it
POINT = ["dispatch", "cold_conns"]


def num(value: float, digits: int = 0) -> str:
    return "–" if pd.isna(value) else f"{value:,.{digits}f}"


def pct(value: float) -> str:
    return "–" if pd.isna(value) else f"{value:+.1f} %"


def in_sweep_order(points: pd.DataFrame, manifest: dict) -> pd.DataFrame:
    """Points in the scenario's order: its dispatches as listed, then idle connections."""
    listed = manifest["scenario"]["sweep"]["server.dispatch"]
    rank = points["dispatch"].map({d: i for i, d in enumerate(listed)})
    return (points.assign(rank=rank).sort_values(["rank", "cold_conns", "repetition"],
                                                 kind="stable").drop(columns="rank"))


def pairs(points: pd.DataFrame) -> pd.DataFrame:
    """One row per point and round: the untraced run (_off) beside the traced one (_on), and
    the traced one's change in %, where both are valid."""
    measured = ["reply_rate_rps", "cpu_server_pct", "cpu_generator_pct", "steal_pct", "valid"]
    key = [*POINT, "repetition"]
    off = points.loc[~points["kernel_trace"].astype(bool), key + measured]
    on = points[points["kernel_trace"].astype(bool)]
    both = off.merge(on, on=key, suffixes=("_off", "_on"))
    valid = both["valid_off"].astype(bool) & both["valid_on"].astype(bool)
    for metric in ("reply_rate_rps", "cpu_server_pct", "cpu_generator_pct"):
        change = 100 * (both[f"{metric}_on"] / both[f"{metric}_off"] - 1)
        both[f"{metric}_change"] = change.where(valid)
    offered = both["offered_rate_rps"]
    both["kept_up"] = ((both["reply_rate_rps_off"] >= KEPT_UP * offered)
                       & (both["reply_rate_rps_on"] >= KEPT_UP * offered))
    both["events_per_s"] = both["kernel_events_traced"] / both["kernel_trace_window_s"]
    return both


def overhead_table(both: pd.DataFrame) -> list[str]:
    lines = ["| dispatch | idle conns | replies/s off | replies/s on | change | server CPU % off "
             "| server CPU % on | change | generator CPU change | events traced /s | steal % "
             "(max) | valid pairs |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
             "---:|"]
    for (dispatch, cold), rows in both.groupby(POINT, sort=False):
        med = rows.median(numeric_only=True)
        lines.append(
            f"| {dispatch} | {cold:,} | {num(med['reply_rate_rps_off'])} | "
            f"{num(med['reply_rate_rps_on'])} | {pct(med['reply_rate_rps_change'])} | "
            f"{num(med['cpu_server_pct_off'], 1)} | {num(med['cpu_server_pct_on'], 1)} | "
            f"{pct(med['cpu_server_pct_change'])} | {pct(med['cpu_generator_pct_change'])} | "
            f"{num(med['events_per_s'])} | "
            f"{num(rows[['steal_pct_off', 'steal_pct_on']].max().max(), 1)} | "
            f"{int(rows['reply_rate_rps_change'].notna().sum())}/{len(rows)} |")
    return lines


def summary(both: pd.DataFrame, points: pd.DataFrame) -> list[str]:
    if both["reply_rate_rps_change"].isna().all():
        return [f"No pair is valid, so this run measures no overhead: other tasks ran on the "
                f"server's CPU for a median {num(points['other_server_cpu_pct'].median())} % "
                f"of each window, and the generator waited for its CPU a median "
                f"{num(points['generator_wait_pct'].median())} % of it. Measure again where "
                "the two CPUs are the run's alone (`make bench-ktrace`)."]
    kept = both[both["kept_up"] & both["reply_rate_rps_change"].notna()]
    behind = both[~both["kept_up"] & both["reply_rate_rps_change"].notna()]
    lines = []
    if not kept.empty:
        cpu = kept["cpu_server_pct_change"]
        lines.append(
            f"Where both arms kept up with the offered {num(kept['offered_rate_rps'].iloc[0])} "
            f"req/s ({counted(kept)}), tracing changed the reply rate by "
            f"{span(kept['reply_rate_rps_change'])} and the server's CPU by {span(cpu)}.")
    if not behind.empty:
        worst = behind["reply_rate_rps_change"]
        where = sorted({f"{d} at {c:,} idle" for d, c in
                        zip(behind["dispatch"], behind["cold_conns"], strict=True)})
        lines.append(
            f"Where an arm fell behind it ({counted(behind)}: {', '.join(where)}), the reply "
            f"rate changed by {span(worst)}.")
    changes = both["reply_rate_rps_change"].dropna()
    if not changes.empty:
        missed = int((changes < -TARGET_PCT).sum())
        lines.append(f"Target (issue #30): at most {TARGET_PCT:.0f} % fewer replies at "
                     f"{num(both['offered_rate_rps'].iloc[0])} req/s over loopback: "
                     + ("met in every valid pair" if not missed else
                        f"NOT met in {missed} of {len(changes)} valid pairs")
                     + f" (worst {pct(changes.min())}).")
    return lines


def counted(frame: pd.DataFrame) -> str:
    return f"{len(frame)} valid pair{'' if len(frame) == 1 else 's'}"


def span(changes: pd.Series) -> str:
    """One change as itself; several as their range and median."""
    if len(changes) == 1:
        return pct(changes.iloc[0])
    return f"{pct(changes.min())} to {pct(changes.max())} (median {pct(changes.median())})"


def growth(traced: pd.DataFrame) -> list[str]:
    """How each dispatch call's in-kernel time per call grows from the fewest idle connections
    to the most, from the traced arm."""
    lines = []
    for dispatch, family in (("select", "select"), ("epoll", "epoll_wait")):
        rows = traced[traced["dispatch"] == dispatch]
        per_call = rows.groupby("cold_conns")[kernel_column(family, "ns_per_call")].median()
        if len(per_call) >= 2 and per_call.iloc[0] > 0:
            lines.append(f"{family}'s in-kernel time per call at {per_call.index[-1]:,} idle "
                         f"connections is {per_call.iloc[-1] / per_call.iloc[0]:.1f} times that "
                         f"at {per_call.index[0]:,}.")
    return lines


def kernel_table(traced: pd.DataFrame) -> list[str]:
    """What the traced arm measured, medians over the rounds given."""
    columns = [("select ns/call", kernel_column("select", "ns_per_call"), 0),
               ("select ready/call", kernel_column("select", "ready_per_call"), 1),
               ("epoll_wait ns/call", kernel_column("epoll_wait", "ns_per_call"), 0),
               ("epoll_wait ready/call", kernel_column("epoll_wait", "ready_per_call"), 1),
               ("dispatch ns/reply", "dispatch_ns_per_reply", 0),
               ("read ns/call", kernel_column("read", "ns_per_call"), 0),
               ("write ns/call", kernel_column("write", "ns_per_call"), 0),
               ("receive softirq ns/packet", kernel_column("rx", "ns_per_packet"), 0)]
    traced = traced.assign(dispatch_ns_per_reply=traced[kernel_column("select", "ns_per_reply")]
                           + traced[kernel_column("epoll_wait", "ns_per_reply")])
    lines = ["| dispatch | idle conns | " + " | ".join(name for name, _, _ in columns) + " |",
             "|---|---:|" + "---:|" * len(columns)]
    for (dispatch, cold), rows in traced.groupby(POINT, sort=False):
        med = rows.median(numeric_only=True)
        lines.append(f"| {dispatch} | {cold:,} | "
                     + " | ".join(num(med[col], d) for _, col, d in columns) + " |")
    return lines


def report(runs_given: RunSet) -> str:
    runs, manifest = benchpage.scenario_runs(runs_given, SCENARIO)
    points = in_sweep_order(runs.points, manifest)
    rounds = points["repetition"].max() + 1
    both = pairs(points)
    traced = points[points["kernel_trace"].astype(bool)]
    # in-kernel time per call is the kernel's, whoever else ran: time switched out is not in
    # it, so the invalid runs say it too when no valid one can
    valid_traced = traced[traced["valid"].astype(bool)]
    shown, over = ((valid_traced, "the valid traced rounds") if not valid_traced.empty else
                   (traced, "every traced round (none is valid: see above)"))
    invalid = points[~points["valid"].astype(bool)]
    reasons = ([f"{len(invalid)} of {len(points)} runs are invalid (docs/validity.md), e.g.: "
                f"{invalid['invalid_reason'].iloc[0]}. Their pairs are left out of the "
                f"changes.", ""] if not invalid.empty else [])
    allowed = manifest.get("kernel_trace") or {}
    return "\n".join([
        "# bench-ktrace: what kernel_trace costs the quickstart", "",
        benchpage.measured_line(manifest, points) + " Generated by `make bench-ktrace`: "
        "scenarios/bench/bench-ktrace.yaml run by `wanbench run`, this page rendered by "
        "scripts/bench_ktrace.py.", "",
        f"The quickstart's points: wb-server pinned to CPU 0, wb-sclient's 50 hot connections "
        f"on CPU 1 offering {num(points['offered_rate_rps'].iloc[0])} req/s over loopback, "
        f"{rounds} round{'s' if rounds > 1 else ''}; in every round each point is measured "
        "with `kernel_trace: false`, then at once with `true` (wb-ktrace attached for the "
        f"window: {allowed.get('detail', 'what it could use is not recorded')}). A change is "
        "the traced run against the untraced one of the same point and round, the median "
        "over rounds; generator CPU changes too, because every system call of the machine "
        "runs the probe's entry and exit programs, whoever makes it.", "",
        *overhead_table(both), "", *summary(both, points), "", *reasons,
        "## What the traced arm measured", "",
        "In-kernel time on a CPU per call (not asleep or preempted in it, nor the network "
        "softirqs that ran inside it), ready descriptors per dispatch call, the dispatch "
        "call's time per reply, and the receive softirq's time per packet (all CPUs), medians "
        f"over {over} (docs/results-format.md).", "",
        *kernel_table(shown), "", " ".join(growth(shown)), "",
        "select scans every descriptor it is given on every call; epoll_wait looks at its "
        "ready list. kernel_trace stays off by default (harness/scenario.py): what it costs "
        "falls on the traced server's CPU and on every other process's system calls. How much "
        "of it the hooks cost before any program works: docs/bench-ktrace-hooks.md "
        "(`make bench-ktrace-hooks`).", ""])


if __name__ == "__main__":
    raise SystemExit(benchpage.main(__doc__, "bench-ktrace", (SCENARIO,), report))
