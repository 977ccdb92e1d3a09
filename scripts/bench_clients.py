"""`make bench-clients`: the generators side by side against one wb-server, table to Markdown.

Server on CPU 0, generator on CPU 1, 3 repetitions of every point, all in one run; the default
load's run after run goes through `wanbench run` (scenarios/bench/bench-clients-latency.yaml),
its runs kept under results/bench/ like the other benches'.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import selectors
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from clients import LoadSpec, command, parse_result, run
from clients.paths import REPO_ROOT
from harness.analysis import benchpage
from harness.metrics.cpu import (
    busy_s_between,
    cpu_percentages,
    cpu_times,
    process_tree,
    task_ids,
)
from harness.results import verdict
from harness.results.runset import read_runs
from harness.servers import RunningServer, ServerConfig, running

SERVER_CPU, GENERATOR_CPU = 0, 1
REPS = 3
COLD_BIG = 1_000_000
COLD_SERVER_WORKERS = 64  # 15,625 descriptors each, under RLIMIT_NOFILE 20,000
COLD_GOAL_S = 20  # issue #32
COLD_READY_TIMEOUT_S = 300
COLD_CLOSED_SLACK = 1000  # sockets of others' work that may come and go meanwhile
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
LATENCY_RATE_RPS = 2000  # the fixed rate latency is resolved at
LATENCY_GOAL_US = 10  # corrected p50 within this of the paced ping-pong's
# the paced ping-pong's gap between requests: the gap the server sees at the fixed rate
LATENCY_SPACING_MS = 1e3 / LATENCY_RATE_RPS
LATENCY_SPIN_US = 150  # longer than a loopback round trip here (~70 us), with margin
DEFAULT_LOAD_SCENARIO = "bench-clients-latency"
DEFAULT_LOAD_YAML = REPO_ROOT / "scenarios/bench" / f"{DEFAULT_LOAD_SCENARIO}.yaml"
OPEN_LOOP_COALESCE_US = 50  # fewer wake-ups at 10^5 req/s; adds <= 50 us of send slip


def children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def measured(server: RunningServer, spec: LoadSpec) -> tuple[dict[str, Any], float, int]:
    """Run spec; return its document, the generator's CPU seconds and the server's replies."""
    replies0, cpu0 = server.snapshot()["replies"], children_cpu_s()
    doc = run(spec)
    return doc, children_cpu_s() - cpu0, server.snapshot()["replies"] - replies0


def load(generator: str, server: RunningServer, tmp: str, **kw: Any) -> LoadSpec:
    kw.setdefault("warmup_s", 0.5)
    native = generator in ("sclient", "asyncio")
    json_path = os.path.join(tmp, f"{generator}.json") if native else None
    return LoadSpec(generator=generator, targets=[server.address], cpu=GENERATOR_CPU,
                    json_path=json_path, **kw)


def med(values: list[float]) -> float:
    return statistics.median(values)


def reps(values: list[float], fmt: str = "{:,.0f}") -> str:
    return " / ".join(fmt.format(v) for v in values)


def closed_loop(server: RunningServer, tmp: str) -> tuple[list[str], float]:
    rows: dict[str, dict[str, list[float]]] = {}
    for _ in range(REPS):
        for gen in ("sclient", "wrk"):
            # wrk measures its whole run, so both run 3 s with no warm-up
            doc, cpu_s, replies = measured(server, load(gen, server, tmp, hot_conns=50,
                                                        duration_s=3, warmup_s=0))
            r = rows.setdefault(gen, {"rps": [], "cpu_us": []})
            r["rps"].append(doc["reply_rate_rps"])
            r["cpu_us"].append(1e6 * cpu_s / replies)
    s, w = rows["sclient"], rows["wrk"]
    lines = [
        "| generator | replies/s (median) | reps | generator CPU µs/reply (median) | reps |",
        "| --- | ---: | --- | ---: | --- |",
    ]
    for gen, r in rows.items():
        lines.append(f"| {gen} | {med(r['rps']):,.0f} | {reps(r['rps'])} | "
                     f"{med(r['cpu_us']):.2f} | {reps(r['cpu_us'], '{:.2f}')} |")
    lines += ["", f"sclient/wrk: replies/s ratio **{med(s['rps']) / med(w['rps']):.2f}** "
              f"(goal ≥ 1), CPU per reply ratio **{med(s['cpu_us']) / med(w['cpu_us']):.2f}** "
              "(goal ≤ 0.8). CPU is the generator process's user+system time (getrusage of the "
              "child) over the server's reply count."]
    return lines, med(s["rps"])


def open_loop(server: RunningServer, tmp: str, closed_rate: float) -> list[str]:
    def at(rate: float) -> dict[str, Any]:
        return run(load("sclient", server, tmp, hot_conns=50, rate_rps=rate, duration_s=3,
                        coalesce_us=OPEN_LOOP_COALESCE_US))

    # Spread-out arrivals batch less in the server than a closed loop does, so its open-loop
    # capacity is lower: offer the closed-loop rate and take what it achieves as saturation.
    overload = [at(round(closed_rate))["reply_rate_rps"] for _ in range(REPS)]
    saturation = med(overload)
    lines = [f"Saturation = median replies/s when offered the closed-loop rate "
             f"({closed_rate:,.0f} req/s): {saturation:,.0f} ({reps(overload)}).", "",
             "| offered (% of saturation) | offered req/s | achieved replies/s (reps) | "
             "worst error | valid (reps) | late sends % (reps) | generator CPU % (reps) | "
             "waiting for CPU % (reps) |", "| ---: | ---: | --- | ---: | --- | --- | --- | --- |"]
    invalid: dict[int, set[str]] = {}
    for pct in (10, 30, 50, 70, 90):
        rate = round(saturation * pct / 100)
        docs = [at(rate) for _ in range(REPS)]
        for d in docs:
            invalid.setdefault(pct, set()).update(d["invalid_reasons"])
        got = [d["reply_rate_rps"] for d in docs]
        worst = max(abs(g - rate) / rate for g in got)
        late = [100 * d["late_sends"] / max(1, d["requests"]["scheduled"]) for d in docs]
        busy = [d["generator_cpu"]["pct"] for d in docs]
        waiting = [100 * d["generator_cpu"]["run_delay_s"] / d["duration_s"] for d in docs]
        lines.append(f"| {pct} | {rate:,} | {reps(got)} | {100 * worst:.2f} % | "
                     f"{' / '.join(str(d['valid']).lower() for d in docs)} | "
                     f"{reps(late, '{:.1f}')} | {reps(busy, '{:.0f}')} | "
                     f"{reps(waiting, '{:.0f}')} |")
    lines.append("")
    for pct, reasons in invalid.items():
        if reasons:
            lines.append(f"- {pct} %, why `valid` is false: {'; '.join(sorted(reasons))}.")
    return lines + ["", "On two CPUs saturation is where server and generator each fill theirs, so "
                    "near it the generator's own CPU is what the validity check flags.", "",
                    f"sclient ran with `--coalesce-us {OPEN_LOOP_COALESCE_US}` (it never "
                    "sleeps for less, sending what fell due meanwhile). Its CPU reads 100 % at "
                    "every rate here: when the gap between sends is shorter than its lead (the "
                    "wake-up lateness this machine shows, clients/README.md) it polls instead "
                    "of sleeping, and that polling is idle time its validity check leaves out. "
                    "`valid` is false when > 1 % of sends left "
                    "> 1 ms late or the generator "
                    "was busy or waiting for its CPU > 95 % of the window; \"waiting for CPU\" "
                    "is its run-queue time (schedstat): other processes on its CPU."]


@dataclass(frozen=True)
class LatencySetting:
    """One generator and setting's latency figures, one value per repetition (µs; CPU in %)."""

    generator: str
    setting: str
    back_to_back_p50_us: list[float]  # ping-pong on one connection, back to back
    paced_p50_us: list[float]  # ping-pong on one connection at the fixed rate's spacing
    uncorrected_p50_us: list[float]  # the fixed rate over 50 connections, from the actual send
    corrected_p50_us: list[float]  # the same, from the intended send
    cpu_pct: list[float]

    def vs_paced(self) -> list[float]:
        return [c - p for c, p in zip(self.corrected_p50_us, self.paced_p50_us, strict=True)]

    def vs_uncorrected(self) -> list[float]:
        return [c - u for c, u in zip(self.corrected_p50_us, self.uncorrected_p50_us,
                                      strict=True)]

    def meets_goal(self) -> bool:
        return abs(med(self.vs_paced())) <= LATENCY_GOAL_US


def measure_latency(server: RunningServer, tmp: str, gen: str, setting: str,
                    extra: dict[str, Any]) -> LatencySetting:
    # wrk2 cannot ping-pong on one connection: sclient with the same setting stands in
    prober = "sclient" if gen == "wrk2" else gen
    back_to_back, paced, uncorrected, corrected, cpu = [], [], [], [], []
    for _ in range(REPS):
        back_to_back.append(run(load(prober, server, tmp, hot_conns=1, duration_s=2, **extra))
                            ["latency"]["uncorrected"]["p50_us"])
        # one connection at the fixed rate: one request per LATENCY_SPACING_MS
        paced.append(run(load(prober, server, tmp, hot_conns=1, rate_rps=LATENCY_RATE_RPS,
                              duration_s=2, **extra))["latency"]["uncorrected"]["p50_us"])
        doc = run(load(gen, server, tmp, hot_conns=50, rate_rps=LATENCY_RATE_RPS, duration_s=3,
                       **extra))
        corrected.append(doc["latency"]["corrected"]["p50_us"])
        uncorrected.append(doc["latency"]["uncorrected"]["p50_us"] or float("nan"))
        cpu.append(doc["generator_cpu"]["pct"] or float("nan"))
    return LatencySetting(gen, setting, back_to_back_p50_us=back_to_back, paced_p50_us=paced,
                          uncorrected_p50_us=uncorrected, corrected_p50_us=corrected,
                          cpu_pct=cpu)


def latency_table(settings: list[LatencySetting]) -> list[str]:
    """The table, each row's verdict on the goal, and which settings meet it."""
    lines = ["| generator | setting | ping-pong p50 µs, back to back | ping-pong p50 µs, one "
             f"request per {LATENCY_SPACING_MS:g} ms | uncorrected p50 µs, "
             f"{LATENCY_RATE_RPS:,} req/s over 50 conns | corrected p50 µs | corrected − paced "
             "ping-pong µs, median (reps) "
             f"| within ±{LATENCY_GOAL_US} µs | corrected − uncorrected µs (reps) | generator "
             "CPU % |", "| --- | --- | ---: | ---: | ---: | ---: | --- | --- | --- | ---: |"]
    for s in settings:
        vs_paced, vs_unc = s.vs_paced(), s.vs_uncorrected()
        lines.append(f"| {s.generator} | {s.setting} | {med(s.back_to_back_p50_us):.1f} | "
                     f"{med(s.paced_p50_us):.1f} | {med(s.uncorrected_p50_us):.1f} | "
                     f"{med(s.corrected_p50_us):.1f} | {med(vs_paced):+.1f} "
                     f"({reps(vs_paced, '{:+.1f}')}) | {'met' if s.meets_goal() else '**not met**'}"
                     f" | {med(vs_unc):+.1f} ({reps(vs_unc, '{:+.1f}')}) | {med(s.cpu_pct):.0f} |")
    met = [f"{s.generator} {s.setting}" for s in settings if s.meets_goal()]
    missed = [f"{s.generator} {s.setting}" for s in settings if not s.meets_goal()]
    return [*lines, "", f"Goal: corrected p50 within ±{LATENCY_GOAL_US} µs of the paced "
            f"ping-pong's p50, judged on the median of their difference over {REPS} "
            f"repetitions. Met by: {', '.join(met) or 'none'}; not met by: "
            f"{', '.join(missed) or 'none'}."]


def latency(server: RunningServer, tmp: str) -> list[str]:
    setups: list[tuple[str, str, dict[str, Any]]] = [
        ("sclient", "default", {}),
        ("sclient", f"--spin-us {LATENCY_SPIN_US}", {"spin_us": LATENCY_SPIN_US}),
        ("asyncio", "uvloop", {})]
    if _on_path("wrk2"):
        setups.append(("wrk2", "default", {}))
    settings = [measure_latency(server, tmp, gen, label, extra) for gen, label, extra in setups]
    lines = [*latency_table(settings), "", "The paced ping-pong is the connection's measured RTT: "
             "a ping-pong on one established connection by the same generator and setting, "
             f"paced at one request per {LATENCY_SPACING_MS:g} ms, the spacing the server "
             f"sees at {LATENCY_RATE_RPS:,} req/s, so that both pay the same server wake-up from "
             "idle (this VM's CPUs take tens of µs to wake); back to back, neither end ever "
             "sleeps long. A generator that sleeps between requests also pays for waking its "
             f"own CPU on every reply; `--spin-us {LATENCY_SPIN_US}` polls instead of sleeping, "
             f"from {LATENCY_SPIN_US} µs before each send until the reply (at most "
             f"{LATENCY_SPIN_US} µs after the send); the CPU column shows the price. "
             "Corrected − uncorrected is the generator's lateness in sending. TCP's own "
             "smoothed RTT of the connections (`latency.tcp_srtt`) was about 2 µs: on "
             "loopback the server's kernel acknowledges a request before the server replies. "
             "Whether that load stays valid run after run: the next section."]
    if not _on_path("wrk2"):
        lines.append("wrk2 is not installed here, so it is not in the table.")
    return lines


def run_default_load(results: Path) -> Path:
    """The default load's scenario through the runner, kept under results; its run directory."""
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(DEFAULT_LOAD_YAML),
                           "--out", str(results), "--allow-invalid", "-q"], cwd=REPO_ROOT,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench_clients.py: `wanbench run {DEFAULT_LOAD_YAML}` exited "
                         f"{done.returncode} (its output above says why)")
    return benchpage.newest_run(results, DEFAULT_LOAD_SCENARIO, "bench-clients")


def default_load(run_dir: Path) -> list[str]:
    """The default load's section from its run: when and beside what it ran, then each run."""
    mine, manifest = benchpage.scenario_runs(read_runs([run_dir]), DEFAULT_LOAD_SCENARIO)
    return [benchpage.measured_line(manifest, mine.points), "",
            *default_load_lines(mine.points, manifest["scenario"])]


def default_load_lines(points: pd.DataFrame, scenario: dict[str, Any]) -> list[str]:
    """What ran (the run's scenario), how many runs were valid, their corrected latency, and
    each invalid run's reason beside who else ran on the two CPUs meanwhile."""
    hot, cpus = scenario["hot"], scenario["cpus"]
    ok = verdict.valid(points)
    good = points[ok]
    retries = scenario["interference_retries"]
    lines = [f"**{int(ok.sum())} of {len(points)} runs valid** (goal: all of them).", "",
             f"{hot['generator']} (`spin_us: {hot['spin_us']}`) offering "
             f"{hot['rate_rps']:,.0f} req/s over {hot['conns']} hot connections to wb-server "
             f"{scenario['server']['dispatch']}, server on CPU {cpus['server']}, generator on "
             f"CPU {cpus['generator']}; {scenario['duration_s']:g} s measured after "
             f"{scenario['warmup_s']:g} s of warm-up, {scenario['repetitions']} runs by "
             f"`wanbench run scenarios/bench/{scenario['name']}.yaml`, each judged by the "
             "runner's rules (docs/validity.md); "
             + ("an invalid run is kept as it happened, not measured again." if not retries
                else f"a run invalid by interference alone is measured again up to {retries} "
                     "times, the last attempt kept."), ""]
    if good.empty:
        lines.append("No valid run, so no latency to report.")
    else:
        lines.append(f"Corrected latency over the {len(good)} valid runs: "
                     f"{_spread_us(good['resp_time_p50_ms'], 'p50')}, "
                     f"{_spread_us(good['resp_time_p99_ms'], 'p99')}.")
    bad = points[~ok].sort_values("repetition")
    if not bad.empty:
        lines += ["", "Each invalid run, the runner's reason, and who else ran on each CPU in "
                  "its window (traced by wb-whoran where it runs; a share of the window, the "
                  "time in brackets):", ""]
        for _, row in bad.iterrows():
            lines.append(f"- run {row['repetition']}: {row['invalid_reason']}. Generator's "
                         f"CPU: {_who_ran(row, 'generator')}. Server's CPU: "
                         f"{_who_ran(row, 'server')}.")
    return lines


def _spread_us(values_ms: pd.Series, name: str) -> str:
    us = 1e3 * values_ms
    return f"{name} median {us.median():,.1f} µs (range {us.min():,.1f}–{us.max():,.1f})"


def _who_ran(row: pd.Series, side: str) -> str:
    """Other tasks' time on side's CPU (generator, server), side's wait for it and the steal
    there, each as a share of the window and its time."""
    window_s = row["window_s"]

    def share(pct: float | None) -> str:
        if pct is None or pd.isna(pct):
            return "not measured"
        return f"{pct:.1f} % ({pct / 100 * window_s * 1e3:,.1f} ms)"

    tasks = row.get(f"other_{side}_tasks")
    named = f": {tasks}" if isinstance(tasks, str) and tasks else ""
    measure = row.get(f"other_{side}_measure")
    bound = f" ({measure})" if isinstance(measure, str) and measure != "traced" else ""
    return (f"other tasks ran {share(row.get(f'other_{side}_cpu_pct'))}{named}{bound}; the "
            f"{side} waited for it {share(row.get(f'{side}_wait_pct'))}, behind other tasks "
            f"{share(row.get(f'{side}_wait_others_pct'))}; steal "
            f"{share(row.get(f'steal_{side}_cpu_pct'))}")


def _on_path(tool: str) -> bool:
    from shutil import which

    return which(tool) is not None


def established_on(port: int) -> int:
    """Server-side established sockets on port, counted by the kernel (ss)."""
    out = subprocess.run(["ss", "-Htn", "state", "established", f"( sport = :{port} )"],
                         capture_output=True, text=True, check=True).stdout
    return len(out.splitlines())


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of pid and its descendants (the server's workers), in bytes."""
    total = 0
    for each in process_tree(pid):
        try:
            total += int(Path(f"/proc/{each}/statm").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return total * PAGE_BYTES


def slab_bytes() -> int:
    """The kernel's slab memory (sockets, their files and inodes, epoll items), in bytes."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Slab:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("/proc/meminfo has no Slab line")


def tcp_sockets() -> int:
    """TCP sockets in use on this machine, both ends of each connection (/proc/net/sockstat)."""
    for line in Path("/proc/net/sockstat").read_text().splitlines():
        if line.startswith("TCP:"):
            return int(line.split()[2])
    raise RuntimeError("/proc/net/sockstat has no TCP line")


def tasks_ran_s() -> dict[tuple[int, str], float]:
    """Every task's time on a CPU since it started (schedstat), by (process, thread)."""
    ran = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            for tid in task_ids(int(entry)):
                try:
                    text = Path(f"/proc/{entry}/task/{tid}/schedstat").read_text()
                except OSError:
                    continue  # gone meanwhile
                ran[(int(entry), tid)] = int(text.split()[0]) / 1e9
    return ran


def others_ran_s(before: dict[tuple[int, str], float], after: dict[tuple[int, str], float],
                 ours: set[int]) -> float:
    """CPU time of the tasks outside `ours` (processes) between two readings: kernel threads,
    neighbours, this script. A task that came and went in between is not seen."""
    return sum(t - before.get(k, 0.0) for k, t in after.items() if k[0] not in ours)


def wait_closed(baseline: int, timeout_s: float = 300) -> None:
    """Until the last repetition's sockets are gone, so that each starts from the same kernel."""
    deadline = time.monotonic() + timeout_s
    while tcp_sockets() > baseline + COLD_CLOSED_SLACK and time.monotonic() < deadline:
        time.sleep(1)


@dataclass(frozen=True)
class ColdRep:
    """One repetition of the cold hold: what each side held and what opening them cost."""

    held_kernel: int
    held_server: int
    established_s: float
    generator_bytes: float  # per connection: the generator's RSS growth while opening them
    server_bytes: float  # per connection: the server's workers' RSS growth
    slab_bytes: float  # per connection: kernel slab growth, both ends
    busy_s: dict[int, float]  # each CPU's busy seconds from start to cold_ready
    pct: dict[int, dict[str, float | None]]  # each CPU's user/system/softirq/idle/steal %
    others_s: float  # other tasks' time on a CPU meanwhile (others_ran_s)
    shards: int
    valid: bool

    @property
    def cpu_us_per_conn(self) -> float:
        """The CPUs' busy time per connection established: what the time is made of once
        every CPU is busy throughout."""
        return 1e6 * sum(self.busy_s.values()) / COLD_BIG


def cold_rep(tmp: str) -> ColdRep:
    cfg = ServerConfig(workers=COLD_SERVER_WORKERS, cpu=SERVER_CPU,
                       stats_path=Path(tmp) / "cold-server-stats.json")
    with running(cfg) as server:
        spec = load("sclient", server, tmp, cold_conns=COLD_BIG, duration_s=0, warmup_s=0)
        rss0, slab0 = tree_rss_bytes(server.proc.pid), slab_bytes()
        ran0 = tasks_ran_s()
        cpus0 = {cpu: cpu_times(cpu) for cpu in (SERVER_CPU, GENERATOR_CPU)}
        proc = subprocess.Popen(command(spec), stdout=subprocess.PIPE, text=True)
        try:
            with selectors.DefaultSelector() as sel:
                sel.register(proc.stdout, selectors.EVENT_READ)
                if not sel.select(COLD_READY_TIMEOUT_S):
                    raise TimeoutError(f"{COLD_BIG} cold connections not ready in "
                                       f"{COLD_READY_TIMEOUT_S} s")
            proc.stdout.readline()  # {"event": "cold_ready", ...}
            cpus1 = {cpu: cpu_times(cpu) for cpu in cpus0}
            others_s = others_ran_s(ran0, tasks_ran_s(), {*process_tree(server.proc.pid),
                                                           *process_tree(proc.pid)})
            slab1, rss1 = slab_bytes(), tree_rss_bytes(server.proc.pid)
            held = established_on(server.port)
            server_held = server.snapshot()["connections_current"]
        finally:
            proc.terminate()
            proc.wait(120)
        doc = parse_result(spec, "", "")
    return ColdRep(
        held_kernel=held, held_server=server_held, established_s=doc["cold"]["established_s"],
        generator_bytes=doc["generator_memory"]["bytes_per_cold_conn"],
        server_bytes=(rss1 - rss0) / COLD_BIG, slab_bytes=(slab1 - slab0) / COLD_BIG,
        busy_s={c: busy_s_between(cpus0[c], cpus1[c]) for c in cpus0},
        pct={c: cpu_percentages(cpus0[c], cpus1[c]) for c in cpus0}, others_s=others_s,
        shards=doc["shards"], valid=doc["valid"])


def cold_hold(tmp: str) -> list[str]:
    lines = ["| rep | established (kernel, server side) | server connections_current | time to "
             "establish s | generator B/conn | server B/conn | kernel slab KB/conn (both ends) "
             f"| CPU {SERVER_CPU} busy s (softirq %, idle %) | CPU {GENERATOR_CPU} busy s "
             "(softirq %, idle %) | CPU µs/conn (both CPUs' busy time) | other tasks' CPU s | "
             "steal % | shards | valid |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: "
             "| ---: | --- |"]
    baseline = tcp_sockets()
    done: list[ColdRep] = []
    for rep in range(REPS):
        r = cold_rep(tmp)
        done.append(r)

        def cpu(c: int, r: ColdRep = r) -> str:
            return (f"{r.busy_s[c]:.1f} ({r.pct[c]['softirq_pct']:.0f}, "
                    f"{r.pct[c]['idle_pct']:.0f})")

        steal = max(r.pct[c]["steal_pct"] or 0.0 for c in r.pct)
        lines.append(f"| {rep} | {r.held_kernel:,} | {r.held_server:,} | {r.established_s:.2f} "
                     f"| {r.generator_bytes:.0f} | {r.server_bytes:.0f} | "
                     f"{r.slab_bytes / 1024:.1f} | {cpu(SERVER_CPU)} | {cpu(GENERATOR_CPU)} | "
                     f"{r.cpu_us_per_conn:.1f} | {r.others_s:.1f} | {steal:.1f} | {r.shards} | "
                     f"{str(r.valid).lower()} |")
        wait_closed(baseline)
    us = med([r.cpu_us_per_conn for r in done])
    ncpus = len(done[0].busy_s)
    floor_s = us * COLD_BIG / 1e6 / ncpus
    ours_floor_s = med([sum(r.busy_s.values()) - r.others_s for r in done]) / ncpus
    lines += ["", f"Time to establish (median): **{med([r.established_s for r in done]):.1f} s** "
              f"(goal ≤ {COLD_GOAL_S} s). The CPUs' busy time per connection (median): "
              f"{us:.1f} µs, so {COLD_BIG:,} connections take at least {us:.1f} µs × "
              f"{COLD_BIG:,} / {ncpus} CPUs = **{floor_s:.1f} s** of this machine even with "
              f"every CPU busy all the time ({ours_floor_s:.1f} s without the other tasks' "
              f"time); the goal needs ≤ {1e6 * COLD_GOAL_S * ncpus / COLD_BIG:.0f} µs.", "",
              f"`wb-server --workers {COLD_SERVER_WORKERS}` on CPU {SERVER_CPU} "
              f"({COLD_BIG // COLD_SERVER_WORKERS:,} descriptors each, under RLIMIT_NOFILE "
              f"{resource.getrlimit(resource.RLIMIT_NOFILE)[0]:,}); wb-sclient `--cpu "
              f"{GENERATOR_CPU}` sharded itself over processes and spread the connections over "
              "127.100.0.x source addresses (≤ 5,000 each); a cold-only run opens them on any "
              f"CPU and keeps to CPU {GENERATOR_CPU} from `cold_ready` on (clients/README.md). "
              "Time to establish is the slowest shard's, from its start to its last connection. "
              "Bytes/conn: RSS growth while opening them ÷ connections (user space: the "
              "generator's shards; the server's workers); kernel slab: /proc/meminfo `Slab` "
              "growth ÷ connections (sockets, their files, inodes and epoll items, both ends). "
              "CPU busy: /proc/stat from the generator's start to `cold_ready` (busy = not idle "
              "and not stolen), with its softirq and idle shares; other tasks: the run time "
              "(schedstat) of every task but the server's and the generator's meanwhile "
              "(kernel threads, neighbours, this script; one that came and went in between is "
              "not seen). Why the time goes where it "
              "does: \"Where a million connections' time goes\" below."]
    return lines


def agreement(server: RunningServer, tmp: str) -> list[str]:
    setups: list[tuple[str, str, dict[str, Any]]] = [
        ("sclient", "sclient", {}), ("asyncio", "asyncio", {}), ("httperf", "httperf", {}),
        ("httperf", "httperf, a connection per request", {"requests_per_conn": 1})]
    if _on_path("wrk2"):
        setups.append(("wrk2", "wrk2", {}))
    rates: dict[str, list[float]] = {label: [] for _, label, _ in setups}
    for _ in range(REPS):
        for gen, label, extra in setups:
            doc = run(load(gen, server, tmp, hot_conns=50, rate_rps=2000, duration_s=3, **extra))
            rates[label].append(doc["reply_rate_rps"])
    ref = med(rates["sclient"])
    lines = ["| generator | reply rate (median) | reps | vs sclient |",
             "| --- | ---: | --- | ---: |"]
    for gen, r in rates.items():
        lines.append(f"| {gen} | {med(r):,.1f} | {reps(r, '{:,.1f}')} | "
                     f"{100 * (med(r) / ref - 1):+.2f} % |")
    lines += ["", "httperf paces each persistent connection with a think time that starts after "
              "the reply (`--wsess`), and measures its whole run including session start-up, so "
              "it lands below the offered rate. With a new connection per request httperf paces "
              "connection starts itself (its classic open-loop mode)."]
    if not _on_path("wrk2"):
        lines.append("wrk2 is not installed here, so it is not compared.")
    return lines


CLOSED_TITLE = "Closed loop, 50 connections: sclient vs wrk"
OPEN_TITLE = "Open loop: achieved vs offered (sclient)"
LATENCY_TITLE = f"Latency resolution at {LATENCY_RATE_RPS:,} req/s"
DEFAULT_LOAD_TITLE = f"The default {LATENCY_RATE_RPS:,} req/s load, run after run"
AGREEMENT_TITLE = "Agreement at 2,000 req/s over 50 hot connections"
COLD_TITLE = f"{COLD_BIG:,} cold connections held"
MEASURED_TITLES = (CLOSED_TITLE, OPEN_TITLE, LATENCY_TITLE, DEFAULT_LOAD_TITLE, AGREEMENT_TITLE,
                   COLD_TITLE)
# Written by hand from a profile (perf, schedstat): carried over whenever the page is rewritten.
HAND_WRITTEN = ("Where a million connections' time goes",)


def section(title: str, body: Callable[[], list[str]]) -> tuple[str, list[str]]:
    """A section's heading and text, ending with how long it took and the load it saw."""
    load_before, started = os.getloadavg(), time.monotonic()
    lines = body()
    load_after = os.getloadavg()
    return title, [*lines, "", f"_{time.monotonic() - started:.0f} s, measured "
                   f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average "
                   f"(1/5/15 min) before {'/'.join(f'{x:.2f}' for x in load_before)}, after "
                   f"{'/'.join(f'{x:.2f}' for x in load_after)}_"]


def page_sections(text: str) -> dict[str, list[str]]:
    """A page's sections by heading (its `## ` lines), each without heading or blank ends."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
        elif current is not None:
            current.append(line)
    return {title: _trimmed(lines) for title, lines in sections.items()}


def _trimmed(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    while lines and not lines[0].strip():
        lines = lines[1:]
    return lines


def _measures(title: str) -> str | None:
    """The section of this script's that a page's title is a measurement of: its own, or an
    older page's under another title (a cold hold of another size, latency at another rate)."""
    if title.endswith("cold connections held"):
        return COLD_TITLE
    if title.startswith("Latency resolution at "):
        return LATENCY_TITLE
    return title if title in MEASURED_TITLES else None


def assemble(head: list[str], measured: list[tuple[str, list[str]]],
             old: dict[str, list[str]]) -> tuple[str, list[str]]:
    """The page: this script's sections in their order, each as measured now or else as the
    old page had it (under the old page's title), then the hand-written sections, carried
    over. Any other old section is left out and named in the second value."""
    now = dict(measured)
    body: list[tuple[str, list[str]]] = []
    for title in MEASURED_TITLES:
        if title in now:
            body.append((title, now[title]))
        else:
            body += [(t, text) for t, text in old.items() if _measures(t) == title]
    body += [(t, old[t]) for t in HAND_WRITTEN if t in old]
    dropped = [t for t in old if _measures(t) is None and t not in HAND_WRITTEN]
    lines = list(head)
    for title, text in body:
        lines += [f"## {title}", "", *text, ""]
    return "\n".join(lines), dropped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("docs/bench-clients.md"))
    parser.add_argument("--only", choices=["latency", "cold"],
                        help="measure only this part (latency: its table and the default "
                             "load run after run); the page's other sections stay as they were")
    args = parser.parse_args()
    old = page_sections(args.out.read_text()) if args.out.is_file() else {}
    if args.only and not old:
        print(f"bench_clients.py: --only {args.only}: {args.out} has no sections to keep; fix: "
              "run without --only once", file=sys.stderr)
        raise SystemExit(2)
    measured: list[tuple[str, list[str]]] = []
    with tempfile.TemporaryDirectory(prefix="wb-bench-clients-") as tmp:
        if args.only != "cold":
            stats = Path(tmp) / "server-stats.json"
            with running(ServerConfig(cpu=SERVER_CPU, stats_path=stats)) as server:
                if not args.only:
                    saturation = 0.0

                    def closed() -> list[str]:
                        nonlocal saturation
                        lines, saturation = closed_loop(server, tmp)
                        return lines

                    measured.append(section(CLOSED_TITLE, closed))
                    measured.append(section(OPEN_TITLE,
                                            lambda: open_loop(server, tmp, saturation)))
                measured.append(section(LATENCY_TITLE, lambda: latency(server, tmp)))
                if not args.only:
                    measured.append(section(AGREEMENT_TITLE, lambda: agreement(server, tmp)))
            # after this server is gone: the runner starts its own on the same CPU
            measured.append(section(DEFAULT_LOAD_TITLE, lambda: default_load(
                run_default_load(REPO_ROOT / benchpage.BENCH_RESULTS))))
        if args.only != "latency":
            measured.append(section(COLD_TITLE, lambda: cold_hold(tmp)))
    head = [
        "# Load generator benchmarks (`make bench-clients`)", "",
        f"Measured on {platform.node()} (kernel {platform.release()}, {os.cpu_count()} CPUs), "
        f"{REPS} repetitions per point. wb-server `--dispatch epoll --accept multi "
        f"--reply-bytes 92` on CPU {SERVER_CPU}, generators on CPU {GENERATOR_CPU}. Each "
        "section ends with when it was measured and the load average then: other engineers' "
        "jobs may have shared the machine, so absolute figures are noisy; the ratios are side "
        "by side. `scripts/bench_clients.py --only cold` measures the cold section alone, "
        "`--only latency` the latency table and the default load run after run; either keeps "
        "the others as they were.", ""]
    page, dropped = assemble(head, measured, old)
    for title in dropped:
        print(f"bench_clients.py: left out \"{title}\" (not this script's section)")
    args.out.write_text(page)
    print(page)


if __name__ == "__main__":
    main()
