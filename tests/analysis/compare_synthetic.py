"""Synthetic runs for `wanbench compare`, with the noise structure of real ones.

Each point x repetition x second of the reply rate of a run is

    level * effect * (1 + b[run]) * (1 + a[rep]) * (1 + e[t])

with b the run-to-run part (relative sd `run_cv`: what another run of the same kernel moves,
half of it shared by every point of the run, half the point's own), a[rep] the part of one
repetition (its variance `between_ratio` times the within-repetition variance of a
repetition's mean) and e an AR(1) series (per-second coefficient of variation `cv`, lag-1
correlation `rho`). Server CPU is sampled the same way (one sample fewer, on the samplers'
clock); latencies have repetition-level noise and the run term, with histograms to match.
The generator's timeline starts at the warm-up, as the runner records it, with a partial
last second.

Defaults follow this machine (2-CPU KVM guest, results/reference/quickstart): the saturated
select point's per-second reply rates vary by 1.2 to 2.2 % (CV) and its repetition means are
about as far apart as the seconds explain; points paced by the generator's fixed rate vary by
0.02 to 0.05 %.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import special

from harness.analysis.compare.samples import Run
from harness.analysis.derive import add_derived, with_verdict

SCENARIO = "synthetic-compare"
SERIES_COLUMNS = ["run_id", "point_id", "repetition", "t_s", "source", "metric", "value"]
HISTOGRAM_COLUMNS = ["run_id", "point_id", "repetition", "kind", "lo_us", "hi_us", "count"]
TSC_HZ = 2.6e9
GRID = [{"dispatch": d, "cold_conns": c} for d in ("select", "poll", "epoll")
        for c in (0, 1000, 2000, 5000)]  # 12 points
PARAMETERS = {"server": "wb-server", "accept": "multi", "reply_bytes": 92, "hot_conns": 50,
              "offered_rate_rps": 40000.0, "one_way_delay_ms": 0.0, "generator": "sclient",
              "workers": 1, "stream_conns": None, "stream_mbps": None}

MANIFEST = {
    "schema_version": 1,
    "scenario_name": SCENARIO,
    "created_at": "2026-11-22T01:26:33Z",
    "sweep_axes": ["dispatch", "cold_conns"],
    "parameters": ["server", "dispatch", "accept", "reply_bytes", "workers", "hot_conns",
                   "cold_conns", "offered_rate_rps", "one_way_delay_ms", "generator",
                   "stream_conns", "stream_mbps"],
    "kernel": {"release": "6.18.0-base", "version": "Linux version 6.18.0-base #1 SMP",
               "config_sha256": "a" * 64},
    "sysctls": {"net.core.somaxconn": "4096", "net.ipv4.tcp_congestion_control": "bbr"},
    "cpu": {"model": "Intel(R) Xeon(R) Processor", "count": 2, "tsc_hz": TSC_HZ,
            "governor": None},
    "tools": {"python": "3.11.7", "wrk": "wrk 4.1.0", "perf": "perf version 6.1",
              "cc": "cc 12.2.0"},
    "git_revision": "0" * 40,
    "hostname": "vm",
    "loadavg_at_start": [0.1, 0.2, 0.3],
    "perf": {"hardware_counters": False, "reason": "synthetic"},
    "topology": {"file": "topologies/loopback.yaml", "backend": "none"},
    "noise_sources": {"kernel command line": {"name": "kernel command line",
                                              "value": "console=ttyS0 root=/dev/vda",
                                              "suggestion": ""}},
}


def scenario_dict(repetitions: int, duration_s: float, warmup_s: float) -> dict:
    return {
        "name": SCENARIO,
        "topology": {"file": "topologies/loopback.yaml", "backend": "auto", "set": {}},
        "server": {"kind": "wb-server", "dispatch": "epoll", "accept": "multi",
                   "reply_bytes": 92, "workers": 1},
        "hot": {"generator": "sclient", "conns": 50, "rate_rps": 40000.0},
        "cold": {"conns": 0},
        "sweep": {"server.dispatch": ["select", "poll", "epoll"],
                  "cold.conns": [0, 1000, 2000, 5000]},
        "repetitions": repetitions,
        "warmup_s": warmup_s,
        "duration_s": duration_s,
        "cpus": {"server": 0, "generator": 1},
    }


@dataclass
class Noise:
    cv: float = 0.015  # per-second coefficient of variation of a saturated point
    cv_paced: float = 0.0005  # of a point the generator's fixed rate paces
    rho: float = 0.2  # lag-1 autocorrelation of the seconds
    between_ratio: float = 0.5  # repetition-to-repetition variance / that of a repetition's mean
    latency_cv: float = 0.05  # repetition-level noise of the mean latency
    p99_cv: float = 0.15  # and of p99
    run_cv: float = 0.01  # relative sd of a run's level: what a second run moves


@dataclass
class Effect:
    """Multiplies the model: throughput on reply rates, latency on response times.

    `points`: the indices of GRID affected (None: all).
    """

    throughput: float = 1.0
    latency: float = 1.0
    cpu: float = 1.0
    points: tuple[int, ...] | None = None


@dataclass
class Synthetic:
    manifest: dict
    points: pd.DataFrame
    timeseries: pd.DataFrame
    histograms: pd.DataFrame
    extra: dict = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return str(self.manifest["run_id"])

    def write(self, root: Path) -> Path:
        run_dir = Path(root) / SCENARIO / self.run_id
        run_dir.mkdir(parents=True)
        (run_dir / "manifest.json").write_text(json.dumps(self.manifest, indent=2))
        self.points.to_parquet(run_dir / "points.parquet", index=False)
        self.timeseries.to_parquet(run_dir / "timeseries.parquet", index=False)
        self.histograms.to_parquet(run_dir / "histograms.parquet", index=False)
        return run_dir

    def as_run(self) -> Run:
        """The loaded form, without touching the disk (fast, for many trials)."""
        return Run(Path(f"<{self.run_id}>"), self.manifest,
                   add_derived(with_verdict(self.points)), self.histograms)


def _point_id(params: dict) -> str:
    text = json.dumps({k: params[k] for k in sorted(params)}, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def _ar1(rng: np.random.Generator, length: int, cv: float, rho: float) -> np.ndarray:
    e = np.empty(length)
    e[0] = rng.normal(0.0, cv)
    innovations = rng.normal(0.0, cv * np.sqrt(1.0 - rho**2), length)
    for t in range(1, length):
        e[t] = rho * e[t - 1] + innovations[t]
    return e


def _ar1_factor(length: int, rho: float) -> float:
    """f with Var(mean of `length` AR(1) values) = sigma^2 * f / length."""
    lags = np.arange(1, length)
    return float(1.0 + 2.0 * np.sum((1.0 - lags / length) * rho**lags))


def _histogram(mean_ms: float, requests: int) -> list[tuple]:
    """Log-spaced buckets of a lognormal latency distribution with this mean (expected counts)."""
    sigma = 0.6
    mu = np.log(mean_ms * 1000.0) - sigma**2 / 2
    edges = np.geomspace(np.exp(mu - 4 * sigma), np.exp(mu + 4 * sigma), 65)
    # scipy.stats.lognorm.cdf(edges, sigma, scale=exp(mu)), as it computes it, without the
    # distribution's argument handling (a fifth of a trial's time in the A/A tests)
    counts = np.round(requests * np.diff(special.ndtr(np.log(edges / np.exp(mu)) / sigma)))
    return [(lo, hi, int(c)) for lo, hi, c in zip(edges[:-1], edges[1:], counts, strict=True)
            if c]


def make_run(*, seed: int, kernel: str = "6.18.0-base", repetitions: int = 3,
             duration_s: int = 5, warmup_s: int = 1, noise: Noise | None = None,
             effect: Effect | None = None, grid: list[dict] | None = None,
             run_id: str | None = None) -> Synthetic:
    """One synthetic run of SCENARIO; the same seed and arguments give the same run."""
    noise = noise or Noise()
    effect = effect or Effect()
    grid = GRID if grid is None else grid
    rng = np.random.default_rng(seed)
    run_id = run_id or f"20261122T{seed % 240000:06d}-{kernel}"
    window = duration_s
    w_reply = noise.cv**2 * _ar1_factor(window, noise.rho) / window
    w_cpu = noise.cv**2 * _ar1_factor(window - 1, noise.rho) / (window - 1)
    shared = rng.normal(0.0, noise.run_cv * np.sqrt(0.5))  # the run's state, every point alike
    rows, series, hists = [], [], []
    for index, cell in enumerate(grid):
        params = {**PARAMETERS, **cell}
        pid = _point_id(params)
        hit = effect.points is None or index in effect.points
        run = 1.0 + shared + rng.normal(0.0, noise.run_cv * np.sqrt(0.5))
        saturated = cell["dispatch"] != "epoll" and cell["cold_conns"] > 0
        level = (40000.0 / (1 + cell["cold_conns"] / 2000) if saturated else 40000.0)
        level *= (effect.throughput if hit else 1.0) * run
        cpu_level = (99.0 if saturated else 35.0 + cell["cold_conns"] / 1000)
        cpu_level *= (effect.cpu if hit else 1.0) * run
        latency = (0.1 * (1 + cell["cold_conns"] / 500) if saturated else 0.1)
        latency *= (effect.latency if hit else 1.0) / run
        for rep in range(repetitions):
            ids = {"run_id": run_id, "point_id": pid, "repetition": rep}
            cv = noise.cv if saturated else noise.cv_paced
            a = rng.normal(0.0, cv / noise.cv * np.sqrt(noise.between_ratio * w_reply))
            replies = level * (1 + a) * (1 + _ar1(rng, window + 1, cv, noise.rho))
            timeline = [*replies, level * 0.002]  # warm-up second, window, partial tail
            key = (run_id, pid, rep)
            series += [(*key, float(t), "generator", "replies", float(v))
                       for t, v in enumerate(timeline)]
            a_cpu = rng.normal(0.0, np.sqrt(noise.between_ratio * w_cpu))
            cpu = cpu_level * (1 + a_cpu) * (1 + _ar1(rng, window - 1, noise.cv, noise.rho))
            packets = 2.0 * replies[1:window]
            for k in range(window - 1):
                t = k + 1.0 + 0.003 * (k + 1)
                series += [
                    (*key, t, "server_proc", "cpu_pct", float(cpu[k])),
                    (*key, t, "server_net", "packets_in_per_s", float(packets[k] / 2)),
                    (*key, t, "server_net", "packets_out_per_s", float(packets[k] / 2)),
                ]
            mean_ms = latency * np.exp(rng.normal(0.0, noise.latency_cv))
            p99_ms = 4.0 * latency * np.exp(rng.normal(0.0, noise.p99_cv))
            reply_rate = float(np.mean(replies[1:]))
            hists += [(*key, "corrected", lo, hi, c)
                      for lo, hi, c in _histogram(mean_ms, int(reply_rate * window))]
            rows.append({
                **ids, "scenario": SCENARIO, "kernel_release": kernel, **params,
                "duration_s": float(window), "reply_rate_rps": reply_rate,
                "request_rate_rps": reply_rate, "resp_time_mean_ms": mean_ms,
                "resp_time_p99_ms": p99_ms, "cpu_server_pct": float(np.mean(cpu)),
                "cycles": float(np.mean(cpu)) / 100 * window * TSC_HZ,
                "cycles_per_packet": float(np.mean(cpu)) / 100 * TSC_HZ / float(np.mean(packets)),
                "cycles_estimated": True, "errors_total": 0, "valid": True,
                "invalid_reason": None,
            })
    manifest = copy.deepcopy(MANIFEST)
    manifest.update(run_id=run_id, repetitions=repetitions,
                    scenario=scenario_dict(repetitions, float(duration_s), float(warmup_s)))
    manifest["kernel"] = {**manifest["kernel"], "release": kernel,
                          "version": f"Linux version {kernel} #1 SMP"}
    # rows as tuples, each frame built once: a trial makes hundreds of runs
    return Synthetic(manifest, pd.DataFrame(rows),
                     pd.DataFrame.from_records(series, columns=SERIES_COLUMNS),
                     pd.DataFrame.from_records(hists, columns=HISTOGRAM_COLUMNS))
