"""`make bench-servers`: every backend under wrk with 0-10000 idle connections, and the epoll
backend against nginx at fixed offered rates. Writes docs/bench-servers.md (+ .json)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from wrk_idle import cpus, measure, raise_fd_limit

import clients
from clients import paths
from harness.metrics.cpu import TreeSchedstat
from harness.servers import DISPATCHES, ServerConfig, running

IDLE_LEVELS = (0, 1000, 5000, 10000)
REPLY_BYTES = 92
# sclient never sleeps for less than this between sends: it then holds 200k+ req/s (a
# timer wake-up per request caps it near 75k); both servers see the same arrivals
COALESCE_US = 50
STABLE_BACKENDS = ("devpoll", "epoll", "rtsig", "uring")  # the papers: flat with idle conns


def sweep(reps: int, seconds: int, conns: int, tmp: Path) -> list[dict]:
    """Repetitions outermost, so that drifting background load spreads over all backends
    and idle levels."""
    server_cpu, wrk_cpu = cpus()
    rows = []
    for rep in range(reps):
        for backend in DISPATCHES:
            cfg = ServerConfig(dispatch=backend, cpu=server_cpu, backlog=16384,
                               reply_bytes=REPLY_BYTES, stats_path=tmp / f"{backend}.json")
            with running(cfg) as server:
                shift = rep % len(IDLE_LEVELS)  # rotate, so no level is always measured first
                for idle in IDLE_LEVELS[shift:] + IDLE_LEVELS[:shift]:
                    point = measure(server, backend, idle, seconds, conns, wrk_cpu)
                    print(f"{backend:<8} idle={idle:<6} rep={rep} "
                          f"{point.reply_rate_rps:>9.0f} req/s "
                          f"{point.cpu_us_per_reply:6.2f} us/reply", flush=True)
                    rows.append(asdict(point) | {"rep": rep})
    return rows


# -- epoll against nginx ----------------------------------------------------------------------

NGINX_CONF = """worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
worker_rlimit_nofile 20000;
events {{ worker_connections 20000; use epoll; }}
http {{
  access_log off;
  keepalive_requests 100000000;
  keepalive_timeout 600s;
  client_body_temp_path {dir}/body;
  proxy_temp_path {dir}/proxy;
  fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi;
  scgi_temp_path {dir}/scgi;
  server {{
    listen 127.0.0.1:{port};
    location / {{ default_type text/plain; return 200 "{body}"; }}
  }}
}}
"""


def body(size: int) -> str:
    """The same body wb-server sends (servers/README.md)."""
    return "".join(chr(ord("a") + i % 26) for i in range(size))


@contextmanager
def nginx(tmp: Path, cpu: int | None) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    exe = shutil.which("nginx") or "/usr/sbin/nginx"
    port = free_port()
    conf = tmp / "nginx.conf"
    conf.write_text(NGINX_CONF.format(dir=tmp, port=port, body=body(REPLY_BYTES)))
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    proc = subprocess.Popen([*pin, exe, "-c", str(conf), "-e", str(tmp / "error.log")])
    try:
        wait_listening(port)
        yield proc, f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nginx did not listen on port {port} within {timeout} s")


def rate_generator() -> str:
    """A fixed offered rate needs wrk2 or wb-sclient; wrk's closed loop is the fallback."""
    if shutil.which("wrk2"):
        return "wrk2"
    try:
        paths.binary("wb-sclient")
        return "sclient"
    except paths.MissingBinary:
        return "wrk"


@dataclass
class RatePoint:
    server: str
    generator: str
    rep: int
    offered_rps: float
    reply_rate_rps: float
    cpu_us_per_reply: float
    generator_valid: bool
    generator_notes: str
    wakeups_per_reply: float | None = None  # times the server was scheduled in, per reply
    cpu_source: str = "schedstat"


def at_fixed_rate(name: str, pid: int, address: str, rate: float, seconds: int, conns: int,
                  gen_cpu: int | None, rep: int, generator: str = "sclient") -> RatePoint:
    closed = generator == "wrk" or rate == 0
    spec = clients.LoadSpec(generator=generator, targets=[address], hot_conns=conns,
                            rate_rps=None if closed else rate, duration_s=seconds, warmup_s=0,
                            cpu=gen_cpu, threads=1 if generator != "sclient" else None,
                            coalesce_us=COALESCE_US if generator == "sclient" else 0)
    server_cpu = TreeSchedstat(pid)
    cpu_before, runs_before = server_cpu.read()
    doc = clients.run(spec)
    cpu_after, runs_after = server_cpu.read()
    replies = max(doc["replies"]["total"], 1)
    return RatePoint(name, generator, rep, 0 if closed else rate, doc["reply_rate_rps"],
                     (cpu_after - cpu_before) / replies * 1e6,
                     bool(doc["valid"]), "; ".join(doc.get("invalid_reasons") or []),
                     (runs_after - runs_before) / replies)


def versus_nginx(reps: int, seconds: int, conns: int, rates: list[float],
                 tmp: Path) -> list[dict]:
    server_cpu, gen_cpu = cpus()
    generator = rate_generator()
    if generator == "wrk":
        rates = [0.0]  # closed loop: one pass at saturation
    rows = []
    cfg = ServerConfig(dispatch="epoll", cpu=server_cpu, reply_bytes=REPLY_BYTES)
    # Alternate, and swap who goes first every repetition, so that drifting background load
    # hits both servers alike.
    for rep, rate in ((rep, rate) for rep in range(reps) for rate in rates):
        pair = []
        for which in (("wb", "nginx") if rep % 2 == 0 else ("nginx", "wb")):
            if which == "wb":
                with running(cfg) as server:
                    pair.append(at_fixed_rate("wb-server epoll", server.proc.pid,
                                              server.address, rate, seconds, conns, gen_cpu,
                                              rep, generator))
                continue
            ngx_dir = tmp / f"nginx{rep}-{rate:.0f}"
            ngx_dir.mkdir()
            with nginx(ngx_dir, server_cpu) as (proc, address):
                pair.append(at_fixed_rate("nginx", proc.pid, address, rate, seconds, conns,
                                          gen_cpu, rep, generator))
        rows += sorted(pair, key=lambda r: r.server == "nginx")
        for row in rows[-2:]:
            print(f"{row.server:<16} rep={rep} {row.reply_rate_rps:>9.0f} req/s "
                  f"{row.cpu_us_per_reply:6.2f} us/reply {row.wakeups_per_reply:.3f} "
                  f"wake-ups/reply valid={row.generator_valid}", flush=True)
    return [asdict(r) for r in rows]


# -- the report -------------------------------------------------------------------------------


def median(values: list[float]) -> float:
    return statistics.median(values)


def sweep_table(rows: list[dict]) -> list[str]:
    lines = ["| backend | idle conns | req/s (median) | req/s (min–max) | req/s vs 0 idle | "
             "CPU µs/reply (median) | CPU/reply vs 0 idle | events/dispatch |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for backend in DISPATCHES:
        for idle in IDLE_LEVELS:
            sel = [r for r in rows if r["backend"] == backend and r["idle"] == idle]
            rates = [r["reply_rate_rps"] for r in sel]
            lines.append(
                f"| {backend} | {idle} | {median(rates):.0f} | {min(rates):.0f}–{max(rates):.0f}"
                f" | {level(rows, backend, idle, 'reply_rate_rps'):.0%} | "
                f"{median([r['cpu_us_per_reply'] for r in sel]):.2f} | "
                f"{level(rows, backend, idle, 'cpu_us_per_reply'):.0%} | "
                f"{median([r['events_per_dispatch'] for r in sel]):.1f} |")
    return lines


def at(rows: list[dict], backend: str, idle: int, key: str) -> float:
    return median([r[key] for r in rows if r["backend"] == backend and r["idle"] == idle])


def level(rows: list[dict], backend: str, idle: int, key: str) -> float:
    """A backend's median at `idle` relative to its median with no idle connections."""
    return at(rows, backend, idle, key) / at(rows, backend, 0, key)


def shape_checks(rows: list[dict]) -> list[str]:
    top = IDLE_LEVELS[-1]

    def of_epoll(b: str) -> float:
        return at(rows, b, top, "reply_rate_rps") / at(rows, "epoll", top, "reply_rate_rps")

    lines = [f"- select at {top} idle: {of_epoll('select'):.1%} of epoll's rate; poll: "
             f"{of_epoll('poll'):.1%} (issue: ~6 % for select)."]
    for b in STABLE_BACKENDS:
        worst_rate = min(level(rows, b, i, "reply_rate_rps") for i in IDLE_LEVELS)
        worst_cpu = max(level(rows, b, i, "cpu_us_per_reply") for i in IDLE_LEVELS)
        lines.append(
            f"- {b}: lowest median rate over the idle levels {worst_rate:.0%} of its 0-idle "
            f"rate ({'within' if worst_rate >= 0.9 else 'NOT within'} 10 %); highest median "
            f"CPU per reply {worst_cpu:.0%} of its 0-idle cost "
            f"({'within' if worst_cpu <= 1.1 else 'NOT within'} 10 %).")
    return lines


def nginx_table(rows: list[dict]) -> list[str]:
    lines = ["| offered req/s | rep | server | replies/s | CPU µs/reply | wake-ups/reply | "
             "generator valid |",
             "| ---: | ---: | --- | ---: | ---: | ---: | --- |"]
    for r in sorted(rows, key=lambda r: (r["offered_rps"] or float("inf"), r["rep"])):
        wakeups = r.get("wakeups_per_reply")
        lines.append(f"| {offered(r['offered_rps'])} | {r['rep']} | {r['server']} | "
                     f"{r['reply_rate_rps']:.0f} | {r['cpu_us_per_reply']:.2f} | "
                     f"{'–' if wakeups is None else f'{wakeups:.3f}'} | "
                     f"{'yes' if r['generator_valid'] else 'no'} |")
    lines.append("")
    for rate in sorted({r["offered_rps"] for r in rows}, key=lambda r: r or float("inf")):
        ours, theirs = cpu_medians([r for r in rows if r["offered_rps"] == rate])
        if not rate:
            lines.append(f"- closed loop (each server saturated, so not the same rate: a "
                         f"reference for the cost of a request without idle wake-ups): median "
                         f"CPU per reply epoll {ours:.2f} µs, nginx {theirs:.2f} µs; ratio "
                         f"{ours / theirs:.2f}×.")
            continue
        verdict = "meets" if ours / theirs <= 0.8 else "does NOT meet"
        lines.append(f"- {offered(rate)} req/s: median CPU per reply epoll {ours:.2f} µs, "
                     f"nginx {theirs:.2f} µs; ratio **{ours / theirs:.2f}×** ({verdict} the "
                     "≤ 0.8× target).")
    invalid = [r for r in rows if r["generator_notes"]]
    if invalid:
        lines += ["", "Runs marked invalid by wb-sclient (it kept the rate, see replies/s, but "
                      "it was busy or waiting for its CPU over 95 % of the window, or sends "
                      "slipped):"]
        for rate in sorted({r["offered_rps"] for r in invalid}, key=lambda r: r or float("inf")):
            at_rate = [r for r in invalid if r["offered_rps"] == rate]
            lines.append(f"- {offered(rate)}: {len(at_rate)} of "
                         f"{sum(r['offered_rps'] == rate for r in rows)} runs, e.g. "
                         f"{at_rate[0]['generator_notes']}")
    lines += ["", "Reading: per request both servers make one recv, one send and a share of one "
              "epoll_wait, and TCP sends the same two segments per exchange for both; "
              "wb-server's user-space part is the smaller one. At fixed rates below saturation "
              "a server also pays per wake-up: its own sleep and wake, and waking the generator "
              "when a reply finds it asleep. Where idle CPUs halt at once (see above), that wake "
              "is an exit to the hypervisor costing the waker tens of µs, alike for both "
              "servers: the lower the rate, the more of the CPU per reply is wake-ups and the "
              "closer the ratio gets to 1. wb-server also wakes a little more often per reply "
              "(wake-ups/reply column): it finishes a batch sooner and goes back to sleep."
              + closed_loop_reading(rows)]
    return lines


def cpu_medians(rows: list[dict]) -> tuple[float, float]:
    """Median CPU per reply of wb-server and of nginx over these rows."""
    return (median([r["cpu_us_per_reply"] for r in rows if r["server"] != "nginx"]),
            median([r["cpu_us_per_reply"] for r in rows if r["server"] == "nginx"]))


def closed_loop_reading(rows: list[dict]) -> str:
    closed = [r for r in rows if not r["offered_rps"]]
    if not closed:
        return ""
    ours, theirs = cpu_medians(closed)
    return (f" Without idle wake-ups (closed loop) the ratio is {ours / theirs:.2f}×: the "
            "cost of the requests themselves.")


def offered(rate: float) -> str:
    return f"{rate:.0f}" if rate else "closed loop"


def machine() -> dict[str, str]:
    model = next((line.split(":", 1)[1].strip()
                  for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "unknown")
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    return {"kernel": platform.release(), "cpu": f"{model} × {os.cpu_count()}",
            "git": rev, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "guest_halt_poll_ns": guest_halt_poll_ns()}


def guest_halt_poll_ns() -> str:
    """How long an idle virtual CPU polls before it halts (cpuidle-haltpoll; kernel default
    200000). At 0 every wake-up of an idle CPU is an exit to the hypervisor."""
    knob = Path("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
    return knob.read_text().strip() if knob.exists() else "n/a (not a haltpoll guest)"


def load() -> str:
    return ", ".join(Path("/proc/loadavg").read_text().split()[:3])


def load_line(ngx: list[dict], args: argparse.Namespace) -> str:
    generator = ngx[0].get("generator", "sclient")
    if generator == "wrk":
        return ("**No fixed-rate generator was available (neither wrk2 nor wb-sclient), so "
                "this compares CPU per reply at wrk's closed-loop saturation instead:** wrk "
                f"over {args.conns} persistent connections ")
    name = "wb-sclient" if generator == "sclient" else generator
    fixed = [f"{r:.0f}" for r in args.rate if r]
    rates = ", ".join(fixed[:-1]) + (" and " if len(fixed) > 1 else "") + fixed[-1]
    closed = " (and in a closed loop, as a reference)" if 0 in args.rate else ""
    coalesced = f" with `--coalesce-us {COALESCE_US}`" if generator == "sclient" else ""
    return (f"{name}{coalesced} at fixed offered rates of {rates} req/s{closed} over "
            f"{args.conns} persistent connections ")


def sweep_method(rows: list[dict]) -> str:
    """How the backend sweep measured CPU (older stored runs counted 10 ms ticks)."""
    source = ("/proc/PID/task/*/schedstat, nanoseconds" if rows[0].get("cpu_source") ==
              "schedstat" else "user + system from /proc/PID/stat, 10 ms ticks")
    return (f"CPU per reply = server CPU time ({source}) / replies in the window (from the "
            "server's stats).")


def nginx_method(ngx: list[dict]) -> str:
    """How CPU per reply was measured (older stored runs counted 10 ms ticks)."""
    if ngx and ngx[0].get("cpu_source") == "schedstat":
        return ("CPU per reply = server process tree CPU time (nginx: master + worker; "
                "/proc/PID/task/*/schedstat, nanoseconds) / replies counted by the generator. "
                "Wake-ups per reply = times the server tree was scheduled in (schedstat run "
                "periods) / replies: most of them are wake-ups from epoll_wait. Below "
                "saturation a server pays per wake-up (its own sleep and wake, and waking the "
                "generator when a reply finds it asleep, which on a virtual machine costs an "
                "inter-processor interrupt), not only per request; the closed loop has almost "
                "no wake-ups and shows the cost of the requests themselves.")
    return ("CPU per reply = server process tree CPU (nginx: master + worker) / replies "
            "counted by the generator.")


def order(ngx: list[dict]) -> str:
    swapped = ngx and ngx[0].get("cpu_source") == "schedstat"  # runs since the swap was added
    return " (who goes first swaps every repetition)" if swapped else ""


def report(meta: dict, rows: list[dict], ngx: list[dict], args: argparse.Namespace) -> str:
    return "\n".join([
        "# wb-server benchmark", "",
        f"Measured {meta['date']} on kernel {meta['kernel']}, {meta['cpu']}, wanbench "
        f"{meta['git']}. Generated by `make bench-servers` (servers/bench.py); raw numbers "
        "in bench-servers.json.", "",
        f"Load average (1, 5, 15 min) before: {meta['load_before']}, after: "
        f"{meta['load_after']}. Other engineers share these 2 CPUs: absolute rates are noisy, "
        "ratios measured side by side in one run are the figures to read.", "",
        "## Backends with idle connections", "",
        f"wrk (closed loop, 1 thread, {args.conns} connections, {args.seconds} s per point) "
        "pinned to one CPU, wb-server pinned to the other; idle connections opened by Python "
        f"from 127.0.x.y sources and confirmed in the server's stats; {args.reps} repetitions; "
        f"{REPLY_BYTES}-byte replies. " + sweep_method(rows), "",
        *sweep_table(rows), "", *shape_checks(rows), "",
        "The rate of a closed loop also moves with whatever else runs on either CPU (see the "
        "min–max spread); CPU per reply is measured on the server alone and is the steadier "
        "of the two figures.", "",
        "## epoll backend vs nginx at fixed offered rates", "",
        *nginx_meta(meta),
        load_line(ngx, args) + f"for {args.seconds} s, {args.reps} repetitions, the two servers "
        f"alternating{order(ngx)}, each pinned to the same CPU and the generator to the other; "
        "nginx "
        f"1.22 with 1 worker, `return 200` of the same {REPLY_BYTES}-byte body, access log off. "
        + nginx_method(ngx), "",
        *nginx_table(ngx), ""])


def nginx_meta(meta: dict) -> list[str]:
    """The nginx part says when it was measured, and under what load (`--part` re-measures
    one part alone)."""
    m = meta.get("nginx_part")
    if not m:
        return []
    polling = (f" Idle CPUs poll for {m['guest_halt_poll_ns']} ns before halting "
               "(guest_halt_poll_ns)." if "guest_halt_poll_ns" in m else "")
    return [f"Measured {m['date']}, wanbench {m['git']}; load average before: "
            f"{m['load_before']}, after: {m['load_after']}."
            + polling, ""]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("docs/bench-servers.md"))
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=4)
    parser.add_argument("--conns", type=int, default=20)
    parser.add_argument("--rate", type=float, nargs="+", default=[20000, 60000, 120000, 180000, 0],
                        help="offered rates for the nginx comparison (0: closed loop)")
    parser.add_argument("--part", choices=("all", "sweep", "nginx"), default="all",
                        help="re-measure only the backend sweep or only the nginx comparison, "
                             "keeping the other part stored in the JSON next to --out")
    parser.add_argument("--from-json", type=Path,
                        help="re-render the report from stored raw results, measuring nothing")
    args = parser.parse_args()
    if args.from_json:
        stored = json.loads(args.from_json.read_text())
        meta, rows, ngx = stored["meta"], stored["sweep"], stored["nginx"]
        vars(args).update(stored["settings"])
        if not isinstance(args.rate, list):  # stored by a version with one rate
            args.rate = [args.rate]
    else:
        meta, rows, ngx = measure_parts(args)
    args.out.write_text(report(meta, rows, ngx, args))
    print(f"wrote {args.out}")
    return 0


def measure_parts(args: argparse.Namespace) -> tuple[dict, list[dict], list[dict]]:
    """Measures the part(s) --part names, takes the other from the stored JSON, and stores
    the whole again."""
    json_path = args.out.with_suffix(".json")
    stored = json.loads(json_path.read_text()) if args.part != "all" else {}
    meta, rows, ngx = stored.get("meta", {}), stored.get("sweep", []), stored.get("nginx", [])
    measured = ("reps", "seconds", "conns") + (("rate",) if args.part != "sweep" else ())
    settings = stored.get("settings", {}) | {k: vars(args)[k] for k in measured}
    with tempfile.TemporaryDirectory(prefix="wb-bench-") as tmp:
        if args.part != "nginx":
            raise_fd_limit(max(IDLE_LEVELS) + 1024)
            meta = machine() | {"load_before": load(), "nginx_part": meta.get("nginx_part")}
            rows = sweep(args.reps, args.seconds, args.conns, Path(tmp))
            meta["load_after"] = load()
        if args.part != "sweep":
            part = machine() | {"load_before": load()}
            ngx = versus_nginx(args.reps, args.seconds, args.conns, args.rate, Path(tmp))
            meta["nginx_part"] = part | {"load_after": load()}
    json_path.write_text(json.dumps(
        {"meta": meta, "settings": settings, "sweep": rows, "nginx": ngx}, indent=1) + "\n")
    return meta, rows, ngx


if __name__ == "__main__":
    raise SystemExit(main())
