"""`make bench-servers`: docs/bench-servers.md from the newest runs of the two bench scenarios.

The Makefile measures with `wanbench run` (scenarios/bench/bench-servers-idle.yaml: every
backend under wrk with 0-10,000 idle connections; bench-servers-nginx.yaml: the epoll backend
against nginx at fixed offered rates); this script only reads the runs and writes the report,
so `--runs` re-renders any stored pair without measuring. Medians are over valid repetitions
(docs/validity.md); the tables say how many there were.

    .venv/bin/python servers/bench.py [--results results/bench] [--runs IDLE_RUN NGINX_RUN]
"""

from __future__ import annotations

import pandas as pd

from harness.analysis import benchpage
from harness.analysis.derive import add_derived
from harness.results import verdict
from harness.results.format import ResultsFormatError
from harness.results.runset import RunSet
from harness.scenario import ExternalServer, WbServer, recorded
from harness.scenario import points as scenario_points

IDLE_SCENARIO, NGINX_SCENARIO = "bench-servers-idle", "bench-servers-nginx"
STABLE_BACKENDS = ("devpoll", "epoll", "rtsig", "uring")  # the papers: flat with idle conns
FLAT = 0.10  # a stable backend stays within 10 % of its 0-idle rate and cost
TARGET_RATIO = 0.7  # wb-server's CPU per reply at most 0.7 × nginx's, at every load


def points_of(runs: RunSet, scenario: str) -> pd.DataFrame:
    points = runs.scenario(scenario).points
    if points.empty:
        raise ResultsFormatError(f"no run of {scenario} among the runs given")
    return add_derived(points)


def valid(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[verdict.valid(rows)]


def num(value: float, digits: int = 0) -> str:
    return "–" if pd.isna(value) else f"{value:,.{digits}f}"


def pct(value: float) -> str:
    return "–" if pd.isna(value) else f"{value:.0%}"


# -- the backends with idle connections ---------------------------------------------------------

def idle_medians(points: pd.DataFrame) -> pd.DataFrame:
    """Per backend and idle level: medians over valid repetitions, and each relative to the
    backend's own 0-idle median."""
    good = valid(points)
    grouped = good.groupby(["dispatch", "cold_conns"])
    table = grouped.agg(rate=("reply_rate_rps", "median"), low=("reply_rate_rps", "min"),
                        high=("reply_rate_rps", "max"), cpu=("cpu_us_per_reply", "median"),
                        events=("events_per_dispatch", "median"))
    counts = points.groupby(["dispatch", "cold_conns"]).agg(
        runs=("valid", "size"), valid=("valid", lambda v: int(v.astype(bool).sum())))
    table = counts.join(table)
    base = table.xs(0, level="cold_conns")
    table["rate_vs_0"] = table["rate"] / base["rate"].reindex(
        table.index.get_level_values("dispatch")).to_numpy()
    table["cpu_vs_0"] = table["cpu"] / base["cpu"].reindex(
        table.index.get_level_values("dispatch")).to_numpy()
    order = list(dict.fromkeys(points["dispatch"]))
    return table.reindex(sorted(table.index, key=lambda k: (order.index(k[0]), k[1])))


def idle_table(table: pd.DataFrame) -> list[str]:
    lines = ["| backend | idle conns | valid | req/s (median) | req/s (min–max) | req/s vs 0 idle "
             "| CPU µs/reply (median) | CPU/reply vs 0 idle | events/dispatch |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for (backend, idle), r in table.iterrows():
        spread = "–" if pd.isna(r["low"]) else f"{num(r['low'])}–{num(r['high'])}"
        lines.append(f"| {backend} | {idle:,} | {r['valid']:.0f} of {r['runs']:.0f} | "
                     f"{num(r['rate'])} | {spread} | {pct(r['rate_vs_0'])} | "
                     f"{num(r['cpu'], 2)} | {pct(r['cpu_vs_0'])} | {num(r['events'], 1)} |")
    return lines


def shape_checks(table: pd.DataFrame) -> list[str]:
    top = table.index.get_level_values("cold_conns").max()

    def of_epoll(backend: str) -> str:
        return pct(table.loc[(backend, top), "rate"] / table.loc[("epoll", top), "rate"])

    lines = [f"- select at {top:,} idle: {of_epoll('select')} of epoll's rate; poll: "
             f"{of_epoll('poll')} (Banga & Mogul: a small fraction)."]
    for backend in STABLE_BACKENDS:
        rows = table.xs(backend, level="dispatch")
        worst_rate, worst_cpu = rows["rate_vs_0"].min(), rows["cpu_vs_0"].max()
        lines.append(
            f"- {backend}: lowest median rate over the idle levels {pct(worst_rate)} of its "
            f"0-idle rate ({'within' if worst_rate >= 1 - FLAT else 'NOT within'} 10 %); "
            f"highest median CPU per reply {pct(worst_cpu)} of its 0-idle cost "
            f"({'within' if worst_cpu <= 1 + FLAT else 'NOT within'} 10 %).")
    return lines


# -- wb-server against nginx ---------------------------------------------------------------------

NGINX = "nginx"
REPLY_FAMILIES = ("epoll_wait", "read", "write")  # the system calls a reply costs (accept: none)


def server_label(server: WbServer | ExternalServer) -> str:
    if isinstance(server, ExternalServer):
        return server.name
    held = f", hold-off {server.min_wait_us} µs" if server.min_wait_us else ""
    return f"wb-server {server.dispatch}{held}"


def labelled(runs: RunSet, scenario: str, points: pd.DataFrame) -> pd.DataFrame:
    """The points with `label`, each server as the page names it: two wb-server entries that
    differ only in min_wait_us, which no results column carries, are told apart by the run's
    recorded scenario."""
    manifest = next(iter(runs.scenario(scenario).raw_manifests.values()))
    grid = scenario_points(recorded(manifest, scenario))
    labels = {point.point_id: server_label(point.config.server) for point in grid}
    order = list(dict.fromkeys(labels.values()))  # as the scenario lists them
    return points.assign(label=pd.Categorical(points["point_id"].map(labels), order))


def offered(rate: float) -> str:
    return "closed loop" if pd.isna(rate) else f"{rate:,.0f} req/s"


def by_rate(points: pd.DataFrame) -> list[tuple[float, pd.DataFrame]]:
    """Rows per offered rate, fixed rates ascending, the closed loop (null) last."""
    rates = sorted(points["offered_rate_rps"].dropna().unique())
    groups = [(rate, points[points["offered_rate_rps"] == rate]) for rate in rates]
    closed = points[points["offered_rate_rps"].isna()]
    return groups + ([(float("nan"), closed)] if not closed.empty else [])


def traced(points: pd.DataFrame) -> pd.Series:
    """Which rows ran with wb-ktrace attached (a run that swept no kernel_trace: none)."""
    column = points.get("kernel_trace", pd.Series(False, index=points.index))
    return column.fillna(False).astype(bool)


def labels_in_order(points: pd.DataFrame) -> list[str]:
    """The servers present, in the scenario's order (else as they come), nginx last."""
    present = set(points["label"])
    listed = getattr(points["label"], "cat", None)
    order = list(listed.categories if listed is not None else dict.fromkeys(points["label"]))
    return sorted((label for label in order if label in present),
                  key=lambda label: label == NGINX)


def per_reply_us(pct: pd.Series, rate: pd.Series) -> pd.Series:
    return pct / 100 / rate * 1e6


def cpu_medians(points: pd.DataFrame) -> pd.DataFrame:
    """Per load and server, over the valid untraced runs: medians of the rate, CPU per reply,
    run periods per reply, the user and kernel split (ticks), response times; each server's
    CPU per reply over nginx's at that load."""
    rows = []
    for rate, at_rate in by_rate(points[~traced(points)]):
        at_load = []
        for label in labels_in_order(at_rate):
            runs = at_rate[at_rate["label"] == label]
            good = valid(runs)
            at_load.append({
                "rate": rate, "label": label, "runs": len(runs), "valid": len(good),
                "replies": good["reply_rate_rps"].median(),
                "cpu": good["cpu_us_per_reply"].median(),
                "periods": good["run_periods_per_reply"].median(),
                "user": per_reply_us(good["cpu_server_user_pct"],
                                     good["reply_rate_rps"]).median(),
                "kernel": per_reply_us(good["cpu_server_sys_pct"],
                                       good["reply_rate_rps"]).median(),
                "p50": good["resp_time_p50_ms"].median(),
                "p99": good["resp_time_p99_ms"].median()})
        nginx = next((row["cpu"] for row in at_load if row["label"] == NGINX), float("nan"))
        rows += [{**row, "over_nginx": row["cpu"] / nginx} for row in at_load]
    return pd.DataFrame(rows)


def cpu_table(medians: pd.DataFrame) -> list[str]:
    lines = ["| load | server | valid | replies/s | CPU µs/reply | × nginx | run periods/reply "
             "| user / kernel µs/reply | p50 / p99 ms |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in medians.itertuples():
        lines.append(f"| {offered(r.rate)} | {r.label} | {r.valid} of {r.runs} | "
                     f"{num(r.replies)} | {num(r.cpu, 2)} | {num(r.over_nginx, 2)} | "
                     f"{num(r.periods, 3)} | {num(r.user, 2)} / {num(r.kernel, 2)} | "
                     f"{num(r.p50, 3)} / {num(r.p99, 3)} |")
    return lines


def ratios(medians: pd.DataFrame) -> list[str]:
    """The target's verdict per load and wb-server entry: met, NOT met, or no verdict where a
    server had no valid run."""
    lines = []
    for rate, rows in medians.groupby("rate", dropna=False, sort=False):
        nginx = rows[rows["label"] == NGINX].iloc[0]
        said = []
        for r in rows[rows["label"] != NGINX].itertuples():
            if pd.isna(r.over_nginx):
                said.append(f"{r.label}: no verdict, {'it' if r.valid == 0 else 'nginx'} "
                            f"had no valid run")
                continue
            verdict = "met" if r.over_nginx <= TARGET_RATIO else "NOT met"
            said.append(f"{r.label} **{r.over_nginx:.2f}×** ({verdict}; p50 {num(r.p50, 3)} "
                        f"ms)")
        lines.append(f"- {offered(rate)}: against nginx's {num(nginx.cpu, 2)} µs per reply "
                     f"(p50 {num(nginx.p50, 3)} ms): {'; '.join(said)}.")
    return lines


def kernel_medians(points: pd.DataFrame) -> pd.DataFrame:
    """Per load and server, over the valid traced runs: system calls per reply, their
    in-kernel µs per reply, and the server's µs on a CPU per reply in the traced window."""
    rows = []
    for rate, at_rate in by_rate(valid(points[traced(points)])):
        for label in labels_in_order(at_rate):
            runs = at_rate[at_rate["label"] == label]
            replies = runs["reply_rate_rps"] * runs["kernel_trace_window_s"]
            row: dict = {"rate": rate, "label": label, "runs": len(runs)}
            for family in REPLY_FAMILIES:
                row[f"{family}_calls"] = (runs[f"kernel_{family}_calls"] / replies).median()
            in_calls = sum(runs[f"kernel_{family}_ns_per_reply"].fillna(0)
                           for family in (*REPLY_FAMILIES, "accept")) / 1000
            on_cpu = runs["kernel_server_on_cpu_s"] / replies * 1e6
            row.update(in_calls=in_calls.median(), on_cpu=on_cpu.median(),
                       rest=(on_cpu - in_calls).median())
            rows.append(row)
    return pd.DataFrame(rows)


def kernel_table(medians: pd.DataFrame) -> list[str]:
    if medians.empty:
        return ["No traced runs: where the time goes is not measured."]
    lines = ["| load | server | traced runs | epoll_wait / read / write calls per reply | "
             "in those calls µs/reply | on a CPU µs/reply | the rest µs/reply |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in medians.itertuples():
        calls = " / ".join(num(getattr(r, f"{family}_calls"), 2) for family in REPLY_FAMILIES)
        lines.append(f"| {offered(r.rate)} | {r.label} | {r.runs} | {calls} | "
                     f"{num(r.in_calls, 2)} | {num(r.on_cpu, 2)} | {num(r.rest, 2)} |")
    return lines


def floor(medians: pd.DataFrame) -> list[str]:
    """Where every wb-server entry misses the target at a load: how far its kernel time
    alone (the ticks' split) is from nginx's whole CPU per reply there, the ratio it could
    not go under with no user-space time at all."""
    lines = []
    for rate, rows in medians.groupby("rate", dropna=False, sort=False):
        ours = rows[rows["label"] != NGINX]
        nginx = rows[rows["label"] == NGINX].iloc[0]
        if ours["over_nginx"].isna().all() or (ours["over_nginx"] <= TARGET_RATIO).any():
            continue
        best = ours.loc[ours["over_nginx"].idxmin()]
        bound = best["kernel"] / nginx["cpu"]
        reach = ("the kernel's time alone is over the target: out of reach while a reply "
                 "costs the kernel what it costs now (the traced table: a read, a write and a "
                 "share of an epoll_wait, for either server)"
                 if bound > TARGET_RATIO else
                 "the kernel's time alone is under the target: user space and wake-ups are "
                 "what is left to cut")
        lines.append(f"- {offered(rate)}: {best['label']} spends {num(best['user'], 2)} µs "
                     f"per reply in user space and {num(best['kernel'], 2)} µs in the kernel; "
                     f"that kernel time alone is {bound:.2f}× nginx's whole "
                     f"{num(nginx['cpu'], 2)} µs: {reach}.")
    return lines


def invalid_reasons(groups: list[tuple[str, pd.DataFrame]]) -> list[str]:
    lines = []
    for label, rows in groups:
        bad = rows[~rows["valid"].astype(bool)]
        if not bad.empty:
            lines.append(f"- {label}: {len(bad)} of {len(rows)} runs, e.g. "
                         f"{bad['invalid_reason'].iloc[0]}")
    if not lines:
        return []
    return ["", "Runs marked invalid (docs/validity.md), left out of the medians:", *lines]


# -- the report ---------------------------------------------------------------------------------

def measured(runs: RunSet, scenario: str, points: pd.DataFrame) -> str:
    manifest = next(iter(runs.scenario(scenario).raw_manifests.values()))
    return benchpage.measured_line(manifest, points)


def budget(runs: RunSet) -> str:
    """The idle sweep's server CPU budget, as the scenario set it."""
    manifest = next(iter(runs.scenario(IDLE_SCENARIO).raw_manifests.values()))
    cpus = manifest["scenario"].get("cpus") or {}
    pct_ = cpus.get("server_budget_pct")
    if not pct_:
        return ""
    return (f" and held to {pct_:.0f} % of it (cgroup CPU bandwidth, "
            f"{cpus.get('budget_period_us', 10_000) / 1000:.0f} ms period) so that the server, "
            "not wrk, is the bottleneck")


def budget_of(points: pd.DataFrame) -> str:
    """The closed loop's server CPU budget, as the run recorded it."""
    budgets = points.get("server_budget_pct", pd.Series(float("nan"), index=points.index))
    held = budgets[points["offered_rate_rps"].isna()].dropna()
    return f"{held.iloc[0]:.0f}" if not held.empty else "100"


def report(runs: RunSet) -> str:
    idle = points_of(runs, IDLE_SCENARIO)
    ngx = labelled(runs, NGINX_SCENARIO, points_of(runs, NGINX_SCENARIO))
    medians = cpu_medians(ngx)
    first = idle.iloc[0]
    table = idle_medians(idle)
    return "\n".join([
        "# wb-server benchmark", "",
        "Generated by `make bench-servers`: two scenarios under scenarios/bench/ run by "
        "`wanbench run`, this page rendered from their results by servers/bench.py. Other "
        "engineers share these 2 CPUs: absolute rates are noisy, ratios measured side by side "
        "in one run are the figures to read.", "",
        "## Backends with idle connections", "",
        measured(runs, IDLE_SCENARIO, idle), "",
        f"wrk (closed loop, {first['hot_conns']} connections, "
        f"{idle['sampled_window_s'].median():.0f} s measured per point after a warm-up) pinned "
        f"to one CPU, wb-server pinned to the other{budget(runs)}; "
        f"wb-sclient "
        f"holds the idle connections, confirmed in the server's stats; "
        f"{idle['repetition'].max() + 1} repetitions in shuffled rounds; "
        f"{first['reply_bytes']}-byte replies. CPU per reply = server CPU time "
        "(/proc/PID/task/*/schedstat, nanoseconds) / replies wrk counted in the window. A run "
        "is valid when the server, not wrk, was the bottleneck and nothing else crowded its "
        "CPU (docs/validity.md).", "",
        *idle_table(table), "", *shape_checks(table),
        *invalid_reasons([(f"{b} at {i:,} idle", rows)
                          for (b, i), rows in idle.groupby(["dispatch", "cold_conns"])]), "",
        "The rate of a closed loop also moves with whatever else runs on either CPU (see the "
        "min–max spread); CPU per reply is measured on the server alone and is the steadier "
        "of the two figures.", "",
        "## wb-server vs nginx: CPU per reply, and where it goes", "",
        measured(runs, NGINX_SCENARIO, ngx), "",
        f"wb-sclient with `coalesce_us: 50` over {ngx['hot_conns'].iloc[0]} persistent "
        "connections at fixed offered rates, and in a closed loop with each server held to "
        f"{budget_of(ngx)} % of its CPU (cgroup CPU bandwidth) so that the server, not the "
        f"generator, is the bottleneck; {ngx['sampled_window_s'].median():.0f} s measured, "
        f"{ngx['repetition'].max() + 1} repetitions in shuffled rounds, each server pinned to "
        "the same CPU and the generator to the other. nginx with 1 worker, `return 200` of the "
        f"same {ngx['reply_bytes'].iloc[0]}-byte body, access log off; wb-server's epoll "
        "backend as it comes, and with a hold-off before each wait while requests keep coming "
        "(`min_wait_us`, servers/README.md: one wake-up serves what arrived meanwhile, at a "
        "price in response time). Every point is measured untraced and, beside it in the same "
        "round, with wb-ktrace attached.", "",
        "CPU per reply = server process tree CPU time (nginx: master + worker; schedstat, "
        "nanoseconds) / replies counted by the generator, untraced runs. Run periods per reply "
        "= times the server tree was put on a CPU / replies: below saturation most are "
        "wake-ups. User / kernel: the same CPU time split by /proc/PID/stat's utime and stime "
        "(10 ms ticks, so coarse; softirq work that ran in the server's time counts as "
        "kernel). p50 / p99: the generator's response times (from each request's intended "
        "send).", "",
        *cpu_table(medians), "",
        f"Target: wb-server's CPU per reply ≤ {TARGET_RATIO}× nginx's at every load.", "",
        *ratios(medians), *floor(medians), "",
        "### Where the time goes (traced runs)", "",
        "wb-ktrace times the server tree's system calls in the kernel (on a CPU, not asleep in "
        "them, without the network softirqs that ran inside them: docs/results-format.md); "
        "calls per reply and their in-kernel time per reply are medians over the valid traced "
        "runs. On a CPU = the tree's time on a CPU in the traced window, on the tracer's "
        "clock; the rest = on a CPU less the calls' in-kernel time: user space, the softirqs "
        "that ran in the server's time (on loopback, a send runs the receiver's TCP input), "
        "and being switched in and out. Tracing itself adds to every system call "
        "(docs/bench-ktrace-hooks.md), so these totals are above the untraced ones.", "",
        *kernel_table(kernel_medians(ngx)),
        *invalid_reasons([(f"{label}, {offered(rate)}{', traced' if on else ''}",
                           rows[(rows["label"] == label) & (traced(rows) == on)])
                          for rate, rows in by_rate(ngx) for label in labels_in_order(rows)
                          for on in (False, True)]),
        ""])


if __name__ == "__main__":
    raise SystemExit(benchpage.main(__doc__, "bench-servers", (IDLE_SCENARIO, NGINX_SCENARIO),
                                    report))
