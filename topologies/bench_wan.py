"""make bench-wan: wrk -c50 through the userspace link emulator vs plain veth, side by side.

Each run brings up lan.yaml with one arm (veth; the emulator with its shipped scheduling
policy; the emulator time-shared), serves a fixed reply from nginx in the server namespace
and runs wrk in the client namespace; arms alternate so all see the same machine load.
Writes a Markdown table (req/s, emulator packets/s per direction, CPU, batching).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from harness.topology import bring_up, commands, load_topology
from harness.topology.cleanup import emulator_pids

REPO = Path(__file__).resolve().parent.parent
NGINX_CONF = """worker_processes 1; daemon off; pid {dir}/nginx.pid; error_log stderr;
events {{ worker_connections 1024; }}
http {{ access_log off; client_body_temp_path {dir}; proxy_temp_path {dir};
  fastcgi_temp_path {dir}; uwsgi_temp_path {dir}; scgi_temp_path {dir};
  server {{ listen {addr}:8080; location / {{ return 200 "hello, wanbench\\n"; }} }} }}
"""


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def one_run(backend: str, sched: str | None, seconds: int) -> dict:
    topology = load_topology(REPO / "topologies/lan.yaml")
    shipped = commands.UNTIMED_SCHED
    commands.UNTIMED_SCHED = sched or shipped  # the unshaped link's policy, for this run
    try:
        handle = bring_up(topology, backend, calibrate=False)
    finally:
        commands.UNTIMED_SCHED = shipped
    with handle, tempfile.TemporaryDirectory() as tmp:
        conf = Path(tmp) / "nginx.conf"
        conf.write_text(NGINX_CONF.format(dir=tmp, addr=handle.address("server")))
        nginx = subprocess.Popen([*handle.exec_prefix("server"), "nginx", "-c", str(conf)],
                                 stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.3)  # nginx has no readiness signal; wrk's errors would show a miss
            pids = emulator_pids(handle.prefix)
            before = sum(cpu_ticks(p) for p in pids)
            out = subprocess.run(
                [*handle.exec_prefix("client"), "wrk", "-t1", "-c50", f"-d{seconds}s",
                 f"http://{handle.address('server')}:8080/"],
                capture_output=True, text=True, check=True).stdout
            used = sum(cpu_ticks(p) for p in pids) - before
        finally:
            nginx.terminate()
            nginx.wait()
    errors = re.search(r"Socket errors: (.*)", out)
    label = backend if sched is None else f"{backend}, {sched}"
    result = {"backend": label, "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out)[1]),
              "errors": errors[1] if errors else "none"}
    if backend == "userspace":
        counters = handle.emulator_counters["lan"]
        result["pps_a_to_b"] = counters["a_to_b"]["forwarded"] / seconds
        result["pps_b_to_a"] = counters["b_to_a"]["forwarded"] / seconds
        result["cpu_pct"] = 100 * used / os.sysconf("SC_CLK_TCK") / seconds
        forwarded = counters["a_to_b"]["forwarded"] + counters["b_to_a"]["forwarded"]
        result["cpu_us_per_packet"] = 1e6 * used / os.sysconf("SC_CLK_TCK") / forwarded
        result["per_wakeup"] = forwarded / (counters["a_to_b"]["wakeups"]
                                            + counters["b_to_a"]["wakeups"])
    return result


def table(runs: list[dict], arms: list[str], load_before: str, load_after: str,
          seconds: int) -> str:
    medians = {arm: statistics.median(r["rps"] for r in runs if r["backend"] == arm)
               for arm in arms}
    lines = [
        "# bench-wan: userspace link emulator vs plain veth",
        "",
        f"`make bench-wan`: topologies/lan.yaml, nginx (1 worker) in the server namespace, "
        f"`wrk -t1 -c50 -d{seconds}s` in the client namespace, 0 ms delay; the arms "
        "alternate run by run. Emulator packets/s are forwarded packets per direction "
        "(client to server = a_to_b); CPU is the emulator process (both threads) over the "
        "wrk run, 100 % = one core. `batch` and `other` are the scheduling policy of the "
        "emulator's threads on this unshaped link (wanbench ships `batch`; "
        "topologies/README.md).",
        "",
        f"Machine load (`uptime`) before: {load_before}; after: {load_after}.",
        "",
        "| run | arm | req/s | emulator pkt/s a_to_b | emulator pkt/s b_to_a "
        "| emulator CPU % | emulator CPU µs/packet | packets per wake-up | socket errors |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(runs, start=1):
        extra = (f"{r['pps_a_to_b']:.0f} | {r['pps_b_to_a']:.0f} | {r['cpu_pct']:.0f} | "
                 f"{r['cpu_us_per_packet']:.1f} | {r['per_wakeup']:.1f}"
                 if "pps_a_to_b" in r else "- | - | - | - | -")
        lines.append(f"| {i} | {r['backend']} | {r['rps']:.0f} | {extra} | {r['errors']} |")
    lines += ["", "| arm | median req/s | over veth |", "|---|---|---|"]
    lines += [f"| {arm} | {m:.0f} | {100 * m / medians['veth']:.1f} % |"
              for arm, m in medians.items()]
    shipped = arms[1]
    rounds = [runs[i:i + len(arms)] for i in range(0, len(runs), len(arms))]
    pairs = [100 * rnd[1]["rps"] / rnd[0]["rps"] for rnd in rounds]
    lines += ["", f"Goal: {shipped} ≥ 90 % of veth. Round by round ({shipped} over the veth "
                  f"run just before it): {', '.join(f'{p:.0f} %' for p in pairs)}; median "
                  f"{statistics.median(pairs):.0f} %.",
              "",
              "Reading: every packet costs the emulator a read and a write system call and "
              "two copies; on this 2-core machine the emulator's CPU comes out of what nginx "
              "and wrk would otherwise use. Other users' load varies run to run (see the "
              "load figures); the round-by-round ratios show how much.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=REPO / "docs/bench-wan.md")
    # Many short alternating pairs: other users' load on this machine moves by the second.
    parser.add_argument("--reps", type=int, default=6)
    parser.add_argument("--seconds", type=int, default=3)
    args = parser.parse_args()
    load_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    arms = [("veth", None), ("userspace", commands.UNTIMED_SCHED), ("userspace", "other")]
    runs = [one_run(backend, sched, args.seconds)
            for _ in range(args.reps) for backend, sched in arms]
    load_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    labels = [backend if sched is None else f"{backend}, {sched}" for backend, sched in arms]
    text = table(runs, labels, load_before, load_after, args.seconds)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
