"""Synthetic run directories in the documented results format, with controlled effects and noise.

The model is deliberately simple but has the papers' shapes: select-like dispatch loses
capacity with cold connections, epoll/rtsig do not; response time grows towards saturation;
cycles per packet rise past ~128 stream connections; where the scenario traces the kernel
(KERNEL_TRACED), select's in-kernel share of the server's CPU rises with cold connections and
flattens, epoll's stays under 1 %, and the stack's in-kernel time per packet rises with
connections (the System Call layer) and latency (the receive softirq). Effects multiply the
model's output so tests know exactly what a comparison should find.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from harness.results.format import KERNEL_TRACE_COLUMNS, kernel_column, kernel_function_column

DEFAULTS = {
    "server": "wb-server",
    "dispatch": "select",
    "accept": "single",
    "reply_bytes": 1259,
    "hot_conns": 50,
    "cold_conns": 0,
    "offered_rate_rps": 500.0,
    "one_way_delay_ms": 0.0,
    "generator": "wb-client",
    "workers": 1,
}
# As the runner fills them: a web point has no stream columns, a stream point no hot load.
WEB_DEFAULTS = {"stream_conns": None, "stream_mbps": None}
STREAM_DEFAULTS = {"hot_conns": None, "offered_rate_rps": None, "stream_conns": 4,
                   "stream_mbps": 100.0}
SCAN_COST = {"select": 1 / 2500, "poll": 1 / 2800, "devpoll": 1 / 20000}  # per cold conn
TSC_HZ = 2.5e9
DURATION_S = 10.0
PROFILE_SYMBOLS = (
    ("do_select", "syscall"),
    ("core_sys_select", "syscall"),
    ("tcp_poll", "tcp"),
    ("sock_poll", "syscall"),
    ("__fdget", "syscall"),
    ("alloc_fd", "syscall"),
    ("tcp_sendmsg", "tcp"),
    ("tcp_v4_rcv", "tcp"),
    ("ip_rcv", "ip"),
    ("dev_queue_xmit", "link"),
    ("loopback_xmit", "driver"),
    ("http_parse_request", "user"),
    ("memcpy", "user"),
)

# Every metric column of the format; a scenario that does not measure one leaves it null.
METRIC_COLUMNS = (
    "duration_s", "reply_rate_rps", "request_rate_rps", "errors_total", "timeouts_total",
    "resp_time_mean_ms", "resp_time_p50_ms", "resp_time_p99_ms",
    "resp_time_uncorrected_mean_ms", "resp_time_uncorrected_p50_ms",
    "resp_time_uncorrected_p99_ms", "cpu_server_pct", "cpu_server_user_pct",
    "cpu_server_sys_pct", "cpu_idle_pct", "cpu_softirq_pct", "cpu_user_pct", "cpu_system_pct",
    "cpu_generator_pct", "dispatch_calls", "dispatch_events", "events_per_dispatch",
    "signals_dequeued", "sigio_overflows", "fallback_rescans", "packets_in", "packets_out",
    "bytes_in", "bytes_out", "cycles", "instructions", "cache_misses", "cycles_estimated",
    "cycles_per_packet", "instructions_per_packet", "stream_throughput_mbps", "valid",
    "invalid_reason",
)

# Grids per scenario: small, but covering each figure's x, series and facets.
SCENARIO_GRIDS: dict[str, dict[str, list]] = {
    "bm98-fig1-select-cpu-vs-cold": {
        "cold_conns": [0, 500, 1000, 2000], "hot_conns": [10, 50], "offered_rate_rps": [100.0],
    },
    "bm98-table1-profile": {"cold_conns": [750], "offered_rate_rps": [220.0]},
    "bm98-fig3-6-naive-vs-realistic": {
        "cold_conns": [0, 750], "reply_bytes": [1259, 8192],
        "offered_rate_rps": [200.0, 600.0, 1000.0, 1400.0, 1800.0, 2200.0],
    },
    "bm98-fig9-saturation-vs-cold": {
        "cold_conns": [0, 1000, 2000], "offered_rate_rps": [1000.0, 2000.0, 3000.0, 4000.0],
    },
    "bm98-ufalloc": {"cold_conns": [0, 1000, 2000], "offered_rate_rps": [200.0]},
    "bmd99-fig8-reply-rate-vs-cold": {
        "cold_conns": [0, 1000, 2000], "dispatch": ["select", "epoll"], "hot_conns": [32],
        "reply_bytes": [1024], "offered_rate_rps": [3000.0],
    },
    "bmd99-fig9-resp-time-vs-rate": {
        "cold_conns": [750], "dispatch": ["select", "epoll"],
        "offered_rate_rps": [500.0, 1000.0, 1500.0, 2000.0],
    },
    "bmd99-table2-profile": {
        "cold_conns": [750], "dispatch": ["select", "epoll"], "offered_rate_rps": [400.0],
    },
    "cm01-fig3-5-vs-connections": {
        "cold_conns": [200, 1000, 2950], "dispatch": ["select", "devpoll", "rtsig"],
        "offered_rate_rps": [500.0, 1000.0],
    },
    "cm01-fig6-9-vs-rate": {
        "cold_conns": [252, 6000], "reply_bytes": [1, 6144],
        "dispatch": ["select", "rtsig"], "accept": ["single", "multi"],
        "offered_rate_rps": [1000.0, 2000.0, 3000.0],
    },
    "cm01-table1-sigio": {"dispatch": ["rtsig"], "offered_rate_rps": [1000.0, 2000.0, 4000.0]},
    "cpp-fig4-cpp-vs-bandwidth": {"stream_conns": [1], "stream_mbps": [10.0, 50.0, 100.0]},
    "cpp-fig5-cpp-vs-connections": {"stream_conns": [4, 64, 256, 2048]},
    "cpp-fig6-cpp-vs-latency": {"stream_conns": [2048], "one_way_delay_ms": [0.0, 10.0, 40.0]},
    # A web workload (like the lead's scenario): hot connections fetching 8 KB replies.
    "cpp-fig2-3-throughput": {
        "hot_conns": [4, 64, 1024], "one_way_delay_ms": [0.0, 40.0], "dispatch": ["epoll"],
        "reply_bytes": [8192], "offered_rate_rps": [2000.0],
    },
    "cpp-table1-layers": {"stream_conns": [4, 2048]},
}


# The scenarios with `kernel_trace: true` (the papers' kernel-cost targets)
KERNEL_TRACED = {"bm98-fig1-select-cpu-vs-cold", "bm98-table1-profile", "bm98-ufalloc",
                 "bmd99-table2-profile", "cpp-fig4-cpp-vs-bandwidth",
                 "cpp-fig5-cpp-vs-connections", "cpp-fig6-cpp-vs-latency", "cpp-table1-layers"}
# What wb-ktrace --probe answers on the synthetic machine (the manifest's kernel_trace)
TRACED_HERE = {"tracepoints": True, "fentry": False,
               "detail": "tracepoints (tp_btf) work; fentry refused (synthetic)"}

STREAM_SCENARIOS = {"cpp-fig4-cpp-vs-bandwidth", "cpp-fig5-cpp-vs-connections",
                    "cpp-fig6-cpp-vs-latency", "cpp-table1-layers"}


def is_stream(scenario: str) -> bool:
    return scenario in STREAM_SCENARIOS


def point_id(params: dict) -> str:
    text = json.dumps({k: params[k] for k in sorted(params)}, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def default_run_id(scenario: str, kernel_release: str) -> str:
    """YYYYmmddTHHMMSS-<release>, with a time of day distinct per scenario."""
    seconds = zlib.crc32(scenario.encode()) % 86400
    clock = f"{seconds // 3600:02d}{seconds // 60 % 60:02d}{seconds % 60:02d}"
    return f"20261121T{clock}-{kernel_release}"


def _grid(scenario: str, grid: dict[str, list]) -> pd.DataFrame:
    defaults = {**DEFAULTS, **(STREAM_DEFAULTS if is_stream(scenario) else WEB_DEFAULTS)}
    axes = {**{k: [v] for k, v in defaults.items()}, **grid}
    rows = [dict(zip(axes, combo, strict=True)) for combo in itertools.product(*axes.values())]
    frame = pd.DataFrame(rows)
    frame["point_id"] = [point_id(r) for r in rows]
    return frame


def _web_metrics(p: pd.DataFrame, noise: np.ndarray, throughput: float, latency: float) -> dict:
    base = np.where(p["reply_bytes"] > 4096, 2400.0, 3000.0)
    scan = p["dispatch"].map(SCAN_COST).fillna(1 / 60000).to_numpy()
    capacity = base / (1 + scan * p["cold_conns"]) * np.where(p["accept"] == "multi", 1.1, 1.0)
    # Closed-loop limit: each hot connection waits one round trip per request.
    rtt_s = (2 * p["one_way_delay_ms"].to_numpy(dtype=float) + 0.3) / 1000
    offered = np.minimum(p["offered_rate_rps"].to_numpy(dtype=float), p["hot_conns"] / rtt_s)
    rho = np.minimum(offered / capacity, 1.0)
    reply = np.minimum(offered, capacity) * throughput * (1 + noise[0])
    busy = np.clip(100 * rho * (1 + noise[1]), 0, 100)
    resp = 0.3 * (1 + scan * p["cold_conns"]) / (1 - np.minimum(rho, 0.97)) * latency
    resp = resp * (1 + noise[2])
    calls = reply * DURATION_S / (1 + 4 * rho)
    rtsig = (p["dispatch"] == "rtsig").to_numpy()
    signals = np.where(rtsig, reply * DURATION_S, np.nan)
    packets = reply * DURATION_S * 2
    cycles = busy / 100 * DURATION_S * TSC_HZ
    return {
        "reply_rate_rps": reply,
        "request_rate_rps": offered * (1 + noise[3] / 10),
        "resp_time_mean_ms": resp,
        "resp_time_p50_ms": resp * 0.8,
        "resp_time_p99_ms": resp * 4,
        "resp_time_uncorrected_mean_ms": resp * 0.7,
        "resp_time_uncorrected_p50_ms": resp * 0.6,
        "resp_time_uncorrected_p99_ms": resp * 2.5,
        "cpu_server_pct": busy,
        "cpu_server_user_pct": busy * 0.3,
        "cpu_server_sys_pct": busy * 0.7,
        "cpu_idle_pct": 100 - busy * 0.97,
        "cpu_softirq_pct": busy * 0.1,
        "cpu_user_pct": busy * 0.3,
        "cpu_system_pct": busy * 0.57,
        "dispatch_calls": calls,
        "dispatch_events": calls * (1 + 4 * rho),
        "events_per_dispatch": 1 + 4 * rho,
        "signals_dequeued": signals,
        "sigio_overflows": np.where(rtsig, np.where(offered > capacity, signals, 0.0), np.nan),
        "fallback_rescans": np.where(rtsig, np.where(offered > capacity, calls, 0.0), np.nan),
        "packets_in": packets,
        "packets_out": packets,
        "bytes_in": packets * 100,
        "bytes_out": packets * p["reply_bytes"].to_numpy(),
        "cycles": cycles,
        "cycles_per_packet": cycles / (2 * packets),
    }


def _stream_metrics(p: pd.DataFrame, noise: np.ndarray, throughput: float, latency: float) -> dict:
    conns = p["stream_conns"].to_numpy(dtype=float)
    delay = p["one_way_delay_ms"].to_numpy(dtype=float)
    # stream_mbps is the total the connections share, as in the runner's scenarios.
    mbps = p["stream_mbps"].to_numpy(dtype=float) / (1 + delay / 400) * throughput
    mbps = mbps * (1 + noise[0])
    packets = mbps * 1e6 / 8 / 1460 * DURATION_S * 1.5
    cpp = 8000 * (1 + 0.5 * np.maximum(0, np.log2(conns / 128))) * (1 + delay / 100)
    cpp = cpp * latency * (1 + noise[1])
    busy = np.clip(cpp * packets / (DURATION_S * TSC_HZ) * 100, 0, 100)
    return {
        "stream_throughput_mbps": mbps,
        "cpu_server_pct": busy,
        "packets_in": packets / 3,
        "packets_out": packets * 2 / 3,
        "cycles": cpp * packets,
        "cycles_per_packet": cpp,
    }


def _dispatch_kernel(p: pd.DataFrame, noise: np.ndarray) -> dict:
    """The dispatch call's in-kernel time, sized from the share of the server's CPU it is
    meant to take (select: 5 % plus up to 40 % as cold connections grow, bending over; epoll:
    0.5 %), and accept's, nearly flat with open descriptors."""
    cold = p["cold_conns"].to_numpy(dtype=float)
    select = (p["dispatch"] == "select").to_numpy()
    share = np.where(select, 5 + 40 * cold / (cold + 1000), 0.5) * (1 + noise[1])
    calls = p["dispatch_calls"].to_numpy(dtype=float)
    ns = share / 100 * p["cpu_server_pct"].to_numpy(dtype=float) / 100 * 1e9 * DURATION_S / calls
    accepts = p["reply_rate_rps"].to_numpy(dtype=float) * DURATION_S
    return {
        kernel_column("select", "calls"): np.where(select, calls, 0.0),
        kernel_column("select", "ns_per_call"): np.where(select, ns, np.nan),
        kernel_column("epoll_wait", "calls"): np.where(select, 0.0, calls),
        kernel_column("epoll_wait", "ns_per_call"): np.where(select, np.nan, ns),
        kernel_column("accept", "calls"): accepts,
        kernel_column("accept", "ns_per_call"): (3000 + 0.02 * cold) * (1 + noise[2]),
    }


def _stack_kernel(p: pd.DataFrame, noise: np.ndarray) -> dict:
    """The sending server's stack in-kernel ns per packet by layer: its writes' System Call
    layer rises past 128 connections and tcp_sendmsg under them stays put, the receive
    softirq rises with latency, the transmit softirq stays put."""
    conns = p["stream_conns"].to_numpy(dtype=float)
    delay = p["one_way_delay_ms"].to_numpy(dtype=float)
    packets_in, packets_out = p["packets_in"].to_numpy(), p["packets_out"].to_numpy()
    per_write = (packets_in + packets_out) / packets_out  # per packet → per write
    socket = 400 * (1 + 0.8 * np.maximum(0, np.log2(conns / 128))) * (1 + noise[1])
    tcp = 1000 * (1 + noise[1])
    return {
        kernel_column("write", "calls"): packets_out,
        kernel_column("write", "ns_per_call"): (socket + tcp) * per_write,
        kernel_column("read", "calls"): np.zeros(len(p)),
        kernel_function_column("tcp_sendmsg", "calls"): packets_out,
        kernel_function_column("tcp_sendmsg", "ns_per_call"): tcp * per_write,
        kernel_function_column("tcp_recvmsg", "calls"): np.zeros(len(p)),
        kernel_column("server_cpu_rx", "packets"): packets_in,
        kernel_column("server_cpu_rx", "ns_per_packet"): 1500 * (1 + delay / 40) * (1 + noise[2]),
        kernel_column("server_cpu_tx", "packets"): packets_out,
        kernel_column("server_cpu_tx", "ns_per_packet"): 200 * (1 + noise[3]),
    }


def _kernel_columns(p: pd.DataFrame, noise: np.ndarray, stream: bool) -> pd.DataFrame:
    """Every kernel_* column of the format, null where the model gives none."""
    model = (_stack_kernel if stream else _dispatch_kernel)(p, noise)
    frame = pd.DataFrame(np.nan, index=p.index, columns=list(KERNEL_TRACE_COLUMNS))
    # the tracer's count of the server's on-CPU time, as schedstat read it
    on_cpu_s = p["cpu_server_pct"].to_numpy(dtype=float) / 100 * DURATION_S
    for column, values in {**model, "kernel_trace_window_s": DURATION_S,
                           "kernel_server_on_cpu_s": on_cpu_s}.items():
        frame[column] = values
    return frame


def make_points(
    scenario: str,
    grid: dict[str, list] | None = None,
    *,
    repetitions: int = 3,
    noise: float = 0.03,
    seed: int = 0,
    throughput: float = 1.0,
    latency: float = 1.0,
    kernel_release: str = "6.18.0-synthetic",
    run_id: str | None = None,
    kernel_trace: bool = True,
) -> pd.DataFrame:
    """points.parquet rows; `throughput` and `latency` scale the model (1.0 = baseline).
    Scenarios of KERNEL_TRACED get the kernel_* columns unless kernel_trace is False (a run
    that did not trace, or could not)."""
    rng = np.random.default_rng(seed)
    params = _grid(scenario, SCENARIO_GRIDS[scenario] if grid is None else grid)
    rows = params.loc[params.index.repeat(repetitions)].reset_index(drop=True)
    rows["repetition"] = np.tile(np.arange(repetitions), len(params))
    draws = rng.normal(0.0, noise, size=(4, len(rows)))
    model = _stream_metrics if is_stream(scenario) else _web_metrics
    metrics = pd.DataFrame(model(rows, draws, throughput, latency), index=rows.index)
    rows = pd.concat([rows, metrics], axis=1)
    if kernel_trace and scenario in KERNEL_TRACED:
        rows = pd.concat([rows, _kernel_columns(rows, draws, is_stream(scenario))], axis=1)
    rows["run_id"] = run_id or default_run_id(scenario, kernel_release)
    rows["scenario"] = scenario
    rows["kernel_release"] = kernel_release
    rows["duration_s"] = DURATION_S
    rows["errors_total"] = 0
    rows["timeouts_total"] = 0
    rows["cpu_generator_pct"] = 20.0
    rows["instructions"] = np.nan  # no hardware counters on the synthetic machine
    rows["cache_misses"] = np.nan
    rows["instructions_per_packet"] = np.nan
    rows["cycles_estimated"] = True
    rows["valid"] = True
    rows["invalid_reason"] = None
    missing = [c for c in METRIC_COLUMNS if c not in rows.columns]
    return pd.concat([rows, pd.DataFrame(np.nan, index=rows.index, columns=missing)], axis=1)


def _manifest(points: pd.DataFrame, scenario: str, parameters: list[str],
              schema_version: int, kernel_trace: dict | None) -> dict:
    sweep = [c for c in parameters if points[c].nunique() > 1]
    return {
        "schema_version": schema_version,
        "run_id": points["run_id"].iloc[0],
        "scenario_name": scenario,
        "created_at": "2026-11-21T00:00:00Z",
        "scenario": {"name": scenario},  # one that validates: readers check it
        "synthetic": True,
        "sweep_axes": sweep,
        "parameters": parameters,
        "repetitions": int(points["repetition"].max() + 1),
        "kernel": {"release": points["kernel_release"].iloc[0], "version": "#1 SMP synthetic",
                   "config_sha256": None},
        "sysctls": {"net.core.somaxconn": 4096},
        "cpu": {"model": "synthetic CPU", "count": 2, "tsc_hz": TSC_HZ, "governor": None},
        "tools": {"python": "3.11"},
        "git_revision": "synthetic",
        "topology": {"file": None, "backend": "none", "probe": None, "calibration": None},
        "perf": {"hardware_counters": False, "reason": "no hardware counters (synthetic)"},
        "kernel_trace": kernel_trace,
    }


def _profiles(points: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    keys = points[["run_id", "point_id", "repetition"]]
    scan = points["dispatch"].map(SCAN_COST).fillna(1 / 60000) * points["cold_conns"]
    frames = []
    for i, (symbol, layer) in enumerate(PROFILE_SYMBOLS):
        weight = (1 + 3 * scan) if i < 5 else 1.0 / (1 + i % 4)
        samples = np.round(200 * np.asarray(weight) * rng.uniform(0.9, 1.1, len(points)))
        frames.append(keys.assign(symbol=symbol, layer=layer, samples=samples))
    profiles = pd.concat(frames, ignore_index=True)
    total = profiles.groupby(["run_id", "point_id", "repetition"])["samples"].transform("sum")
    profiles["pct"] = 100 * profiles["samples"] / total
    return profiles


def _timeseries(points: pd.DataFrame) -> pd.DataFrame:
    keys = points[["run_id", "point_id", "repetition"]]
    seconds = np.arange(int(DURATION_S))
    frames = [
        keys.assign(t_s=float(t), source=source, metric=metric, value=points[column].to_numpy())
        for t in seconds
        for source, metric, column in (
            ("generator", "replies", "reply_rate_rps"),
            ("server_proc", "cpu_pct", "cpu_server_pct"),
        )
    ]
    return pd.concat(frames, ignore_index=True)


def _histograms(points: pd.DataFrame) -> pd.DataFrame:
    keys = points[["run_id", "point_id", "repetition"]]
    edges = [(0, 500), (500, 1000), (1000, 5000), (5000, 50000)]
    return pd.concat(
        [keys.assign(kind=kind, lo_us=lo, hi_us=hi, count=100 // (i + 1))
         for kind in ("corrected", "uncorrected") for i, (lo, hi) in enumerate(edges)],
        ignore_index=True,
    )


def write_run(
    root: Path,
    points: pd.DataFrame,
    *,
    with_profiles: bool = True,
    with_parquet: bool = True,
    schema_version: int = 1,
    seed: int = 0,
    kernel_trace: dict | None = None,
) -> Path:
    """Write one run directory under root/<scenario>/<run_id>/ and return its path. The
    manifest's kernel_trace is `kernel_trace` (what wb-ktrace --probe answered where the run
    was made), else TRACED_HERE where the points hold kernel columns, else null (the run
    did not ask to trace)."""
    scenario = points["scenario"].iloc[0]
    run_dir = Path(root) / scenario / points["run_id"].iloc[0]
    (run_dir / "points").mkdir(parents=True)
    parameters = [*DEFAULTS, *WEB_DEFAULTS]
    traced = "kernel_trace_window_s" in points.columns
    manifest = _manifest(points, scenario, parameters, schema_version,
                         kernel_trace or (TRACED_HERE if traced else None))
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))
    tables = {"points": points, "timeseries": _timeseries(points),
               "histograms": _histograms(points)}
    if with_profiles:
        tables["profiles"] = _profiles(points, np.random.default_rng(seed))
    _write_records(run_dir, tables)
    if with_parquet:
        for name, frame in tables.items():
            frame.to_parquet(run_dir / f"{name}.parquet", index=False)
    return run_dir


def _write_records(run_dir: Path, tables: dict[str, pd.DataFrame]) -> None:
    """points/<point_id>-r<rep>.json as the runner writes them: the row plus its table rows."""
    keys = ["point_id", "repetition"]
    grouped = {name: {k: json.loads(g.to_json(orient="records")) for k, g in frame.groupby(keys)}
               for name, frame in tables.items() if name != "points"}
    for row in json.loads(tables["points"].to_json(orient="records")):
        key = (row["point_id"], row["repetition"])
        record = {"point": row, "timeseries": [], "histograms": [], "profiles": []}
        record.update({name: rows.get(key, []) for name, rows in grouped.items()})
        name = f"{row['point_id']}-r{row['repetition']}.json"
        (run_dir / "points" / name).write_text(json.dumps(record))


def write_all_scenarios(root: Path, *, repetitions: int = 3, seed: int = 0,
                        grids: dict[str, dict[str, list]] | None = None) -> list[Path]:
    """One run per reproduction scenario (all figures have data)."""
    grids = grids or SCENARIO_GRIDS
    return [
        write_run(root, make_points(name, grid, repetitions=repetitions, seed=seed + i), seed=i)
        for i, (name, grid) in enumerate(grids.items())
    ]


def redraw(template: pd.DataFrame, *, seed: int, noise: float = 0.03, throughput: float = 1.0,
           metric: str = "reply_rate_rps") -> pd.DataFrame:
    """A noise-free points table (make_points(noise=0)) with fresh noise on one metric.

    Many seeded trials need only new draws, not a new grid: this keeps them fast.
    """
    rng = np.random.default_rng(seed)
    out = template.copy()
    out[metric] = template[metric] * throughput * (1 + rng.normal(0.0, noise, len(template)))
    return out
