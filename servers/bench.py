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

IDLE_SCENARIO, NGINX_SCENARIO = "bench-servers-idle", "bench-servers-nginx"
STABLE_BACKENDS = ("devpoll", "epoll", "rtsig", "uring")  # the papers: flat with idle conns
FLAT = 0.10  # a stable backend stays within 10 % of its 0-idle rate and cost
TARGET_RATIO = 0.8  # wb-server's CPU per reply at most 0.8 × nginx's


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


# -- epoll against nginx ------------------------------------------------------------------------

def offered(rate: float) -> str:
    return "closed loop" if pd.isna(rate) else f"{rate:,.0f}"


def by_rate(points: pd.DataFrame) -> list[tuple[float, pd.DataFrame]]:
    """Rows per offered rate, fixed rates ascending, the closed loop (null) last."""
    rates = sorted(points["offered_rate_rps"].dropna().unique())
    groups = [(rate, points[points["offered_rate_rps"] == rate]) for rate in rates]
    closed = points[points["offered_rate_rps"].isna()]
    return groups + ([(float("nan"), closed)] if not closed.empty else [])


def nginx_table(points: pd.DataFrame) -> list[str]:
    lines = ["| offered req/s | rep | server | replies/s | CPU µs/reply | run periods/reply | "
             "valid |", "| ---: | ---: | --- | ---: | ---: | ---: | --- |"]
    for rate, rows in by_rate(points):
        for _, r in rows.sort_values(["repetition", "server"], key=_wb_first).iterrows():
            lines.append(f"| {offered(rate)} | {r['repetition']} | {server_name(r['server'])} | "
                         f"{num(r['reply_rate_rps'])} | {num(r['cpu_us_per_reply'], 2)} | "
                         f"{num(r['run_periods_per_reply'], 3)} | "
                         f"{'yes' if r['valid'] else 'no'} |")
    return lines


def _wb_first(column: pd.Series) -> pd.Series:
    return column.map(lambda s: s != "wb-server") if column.name == "server" else column


def server_name(server: str) -> str:
    return "wb-server epoll" if server == "wb-server" else server


def ratios(points: pd.DataFrame) -> list[str]:
    lines = []
    for rate, rows in by_rate(points):
        good = valid(rows)
        ours = good.loc[good["server"] == "wb-server", "cpu_us_per_reply"].median()
        theirs = good.loc[good["server"] == "nginx", "cpu_us_per_reply"].median()
        counted = (f"over {len(good)} valid of {len(rows)} runs" if len(good) < len(rows)
                   else f"over {len(rows)} runs")
        if pd.isna(ours) or pd.isna(theirs):
            ours, theirs = (rows.loc[rows["server"] == s, "cpu_us_per_reply"].median()
                            for s in ("wb-server", "nginx"))
            lines.append(f"- {offered(rate)}: no verdict, a server has no valid run here; over "
                         f"all {len(rows)} runs (see the reasons below) median CPU per reply "
                         f"epoll {num(ours, 2)} µs, nginx {num(theirs, 2)} µs, ratio "
                         f"{num(ours / theirs, 2)}×.")
            continue
        ratio = ours / theirs
        if pd.isna(rate):
            lines.append(f"- closed loop (each server saturated, so not the same rate: a "
                         f"reference for the cost of a request without idle wake-ups): median "
                         f"CPU per reply epoll {ours:.2f} µs, nginx {theirs:.2f} µs ({counted}); "
                         f"ratio {ratio:.2f}×.")
            continue
        verdict = "meets" if ratio <= TARGET_RATIO else "does NOT meet"
        lines.append(f"- {offered(rate)} req/s: median CPU per reply epoll {ours:.2f} µs, nginx "
                     f"{theirs:.2f} µs ({counted}); ratio **{ratio:.2f}×** ({verdict} the "
                     f"≤ {TARGET_RATIO}× target).")
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


def report(runs: RunSet) -> str:
    idle, ngx = points_of(runs, IDLE_SCENARIO), points_of(runs, NGINX_SCENARIO)
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
        "## epoll backend vs nginx at fixed offered rates", "",
        measured(runs, NGINX_SCENARIO, ngx), "",
        f"wb-sclient with `coalesce_us: 50` at fixed offered rates (and in a closed loop, as a "
        f"reference) over {ngx['hot_conns'].iloc[0]} persistent connections for "
        f"{ngx['sampled_window_s'].median():.0f} s measured, "
        f"{ngx['repetition'].max() + 1} repetitions in "
        "shuffled rounds, each server pinned to the same CPU and the generator to the other; "
        "nginx with 1 worker, `return 200` of the same "
        f"{ngx['reply_bytes'].iloc[0]}-byte body, access log off. CPU per reply = server "
        "process tree CPU time (nginx: master + worker; schedstat, nanoseconds) / replies "
        "counted by the generator. Run periods per reply = times the server tree was put on a "
        "CPU / replies: below saturation most of them are wake-ups from epoll_wait. A server "
        "pays per wake-up (its own sleep and wake, and waking the generator when a reply finds "
        "it asleep, which on a virtual machine costs an inter-processor interrupt), not only "
        "per request; the closed loop has almost no wake-ups and shows the cost of the "
        "requests themselves.", "",
        *nginx_table(ngx), "", *ratios(ngx),
        *invalid_reasons([(f"{server_name(s)}, {offered(rate)}", rows[rows["server"] == s])
                          for rate, rows in by_rate(ngx) for s in ("wb-server", "nginx")]),
        "",
        "Reading: per request both servers make one recv, one send and a share of one "
        "epoll_wait, and TCP sends the same two segments per exchange for both; wb-server's "
        "user-space part is the smaller one. At fixed rates below saturation a server also "
        "pays per wake-up. Where idle CPUs halt at once, that wake is an exit to the "
        "hypervisor costing the waker tens of µs, alike for both servers: the lower the rate, "
        "the more of the CPU per reply is wake-ups and the closer the ratio gets to 1.", ""])


if __name__ == "__main__":
    raise SystemExit(benchpage.main(__doc__, "bench-servers", (IDLE_SCENARIO, NGINX_SCENARIO),
                                    report))
