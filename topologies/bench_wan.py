"""make bench-wan: wrk -c50 through the userspace link emulator vs plain veth, side by side.

Each run brings up lan.yaml with one arm (veth; the emulator with the link's busy_poll_us;
the emulator as shipped, sleeping between bursts), serves a fixed reply from nginx in the
server namespace and runs wrk in the client namespace; arms alternate so all see the same
machine load. Writes a Markdown table (req/s, emulator packets/s per direction, CPU,
batching, idle and other users' CPU).
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

from harness.metrics.cpu import TreeCpu
from harness.topology import bring_up, load_topology
from harness.topology.cleanup import emulator_pids

REPO = Path(__file__).resolve().parent.parent
BUSY_POLL_US = 200
NGINX_CONF = """worker_processes 1; daemon off; pid {dir}/nginx.pid; error_log stderr;
events {{ worker_connections 1024; }}
http {{ access_log off; client_body_temp_path {dir}; proxy_temp_path {dir};
  fastcgi_temp_path {dir}; uwsgi_temp_path {dir}; scgi_temp_path {dir};
  server {{ listen {addr}:8080; location / {{ return 200 "hello, wanbench\\n"; }} }} }}
"""


def machine_ticks() -> tuple[int, int]:
    """(busy, idle) ticks of all CPUs; busy includes interrupts, which processes are charged."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, idle


def one_run(backend: str, busy_poll_us: int, seconds: int) -> dict:
    topology = load_topology(REPO / "topologies/lan.yaml",
                             {"links.lan.busy_poll_us": str(busy_poll_us)})
    handle = bring_up(topology, backend, calibrate=False)
    with handle, tempfile.TemporaryDirectory() as tmp:
        conf = Path(tmp) / "nginx.conf"
        conf.write_text(NGINX_CONF.format(dir=tmp, addr=handle.address("server")))
        nginx = subprocess.Popen([*handle.exec_prefix("server"), "nginx", "-c", str(conf)],
                                 stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.3)  # nginx has no readiness signal; wrk's errors would show a miss
            emulator, server = TreeCpu(emulator_pids(handle.prefix)), TreeCpu([nginx.pid])
            before, served = sum(emulator.read()), sum(server.read())
            busy, idle = machine_ticks()
            wrk = subprocess.Popen(
                [*handle.exec_prefix("client"), "wrk", "-t1", "-c50", f"-d{seconds}s",
                 f"http://{handle.address('server')}:8080/"], stdout=subprocess.PIPE, text=True)
            out = wrk.stdout.read()
            _, status, usage = os.wait4(wrk.pid, 0)  # wrk's own CPU, as it exits
            if status:
                raise RuntimeError(f"wrk failed ({status}): {out}")
            used = sum(emulator.read()) - before  # seconds
            served = sum(server.read()) - served
            busy, idle = (a - b for a, b in zip(machine_ticks(), (busy, idle), strict=True))
        finally:
            nginx.terminate()
            nginx.wait()
    errors = re.search(r"Socket errors: (.*)", out)
    tick = os.sysconf("SC_CLK_TCK")
    ours = used + served + usage.ru_utime + usage.ru_stime
    result = {"backend": label(backend, busy_poll_us),
              "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out)[1]),
              "errors": errors[1] if errors else "none",
              "idle_pct": 100 * idle / (busy + idle),
              "others_pct": max(0.0, 100 * (busy / tick - ours) / seconds)}
    if backend == "userspace":
        counters = handle.emulator_counters["lan"]
        result["pps_a_to_b"] = counters["a_to_b"]["forwarded"] / seconds
        result["pps_b_to_a"] = counters["b_to_a"]["forwarded"] / seconds
        result["cpu_pct"] = 100 * used / seconds
        forwarded = counters["a_to_b"]["forwarded"] + counters["b_to_a"]["forwarded"]
        result["cpu_us_per_packet"] = 1e6 * used / forwarded
        result["per_wakeup"] = forwarded / max(1, counters["a_to_b"]["wakeups"]
                                               + counters["b_to_a"]["wakeups"])
        result["pauses"] = sum(counters[d]["busy_poll_pauses"] for d in ("a_to_b", "b_to_a"))
    return result


def label(backend: str, busy_poll_us: int) -> str:
    if backend != "userspace":
        return backend
    return (f"userspace, busy_poll_us {busy_poll_us}" if busy_poll_us else
            "userspace, default (no busy-poll)")


def table(runs: list[dict], arms: list[str], load_before: str, load_after: str,
          seconds: int) -> str:
    medians = {arm: statistics.median(r["rps"] for r in runs if r["backend"] == arm)
               for arm in arms}
    lines = [
        "# bench-wan: userspace link emulator vs plain veth",
        "",
        f"`make bench-wan`: topologies/lan.yaml, nginx (1 worker) in the server namespace, "
        f"`wrk -t1 -c50 -d{seconds}s` in the client namespace, 0 ms delay, nothing pinned; "
        "the arms alternate run by run. Emulator packets/s are forwarded packets per "
        "direction (client to server = a_to_b); emulator CPU is the wb-linkem process (both "
        "threads) over the wrk run, 100 % = one core, busy-polling included; a wake-up is a "
        "forwarding thread's sleep ending; a pause is busy-polling stopped because other "
        "runnable tasks outnumbered the CPUs. Idle is the machine's (both CPUs); other CPU is "
        "CPU time not charged to nginx, wrk or the emulator (other users, kernel threads), "
        "100 % = one core. The emulator's threads run SCHED_BATCH on this unshaped link; "
        f"the second arm sets the link's `busy_poll_us: {BUSY_POLL_US}` (off by default: the "
        "polling takes CPU from a saturated server, topologies/README.md), the third is the "
        "default.",
        "",
        f"Machine load (`uptime`) before: {load_before}; after: {load_after}.",
        "",
        "| run | arm | req/s | emulator pkt/s a_to_b | emulator pkt/s b_to_a "
        "| emulator CPU % | emulator CPU µs/packet | packets per wake-up | busy-poll pauses "
        "| machine idle % | other CPU % | socket errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(runs, start=1):
        extra = (f"{r['pps_a_to_b']:.0f} | {r['pps_b_to_a']:.0f} | {r['cpu_pct']:.0f} | "
                 f"{r['cpu_us_per_packet']:.1f} | {r['per_wakeup']:.1f} | {r['pauses']}"
                 if "pps_a_to_b" in r else "- | - | - | - | - | -")
        lines.append(f"| {i} | {r['backend']} | {r['rps']:.0f} | {extra} | "
                     f"{r['idle_pct']:.0f} | {r['others_pct']:.0f} | {r['errors']} |")
    lines += ["", "| arm | median req/s | over veth |", "|---|---|---|"]
    lines += [f"| {arm} | {m:.0f} | {100 * m / medians['veth']:.1f} % |"
              for arm, m in medians.items()]
    rounds = [runs[i:i + len(arms)] for i in range(0, len(runs), len(arms))]
    quiet = [all(r["others_pct"] <= 5 for r in rnd) for rnd in rounds]
    lines.append("")
    for k, arm in enumerate(arms[1:], start=1):
        pairs = [100 * rnd[k]["rps"] / rnd[0]["rps"] for rnd in rounds]
        marked = list(zip(pairs, quiet, strict=True))
        calm = [p for p, q in marked if q]
        lines.append(
            f"{arm} over the veth run of the same round, round by round: "
            + ", ".join(f"{p:.0f} %" + ("" if q else "*") for p, q in marked)
            + f"; median {statistics.median(pairs):.0f} %"
            + (f", {statistics.median(calm):.0f} % over the {len(calm)} "
               f"round{'s' if len(calm) > 1 else ''} without *"
               if calm and len(calm) < len(pairs) else "") + ".")
        lines.append("")
    lines += [f"Goal: {arms[1]} ≥ 90 % of veth. * = other processes took more than 5 % of a "
              "core in a run of that round.",
              "",
              "Reading: every packet costs the emulator a read and a write system call, two "
              "copies and an skb, and the write runs the receiver's TCP input (as veth's "
              "sender does). Without busy-polling the forwarding threads sleep between bursts "
              "and both CPUs sit idle about a quarter of the time (machine idle column): each "
              "burst waits for a sleeping thread's wake-up, on an idle, halted virtual CPU, "
              "and the 50 requests move round the loop in convoys. With busy-polling the "
              "threads keep polling while traffic flows, yielding to nginx and wrk between "
              "polls, so they use CPU that would otherwise be idle: emulator CPU goes up, "
              "machine idle goes down. Other users' load varies run to run (see the load "
              "figures and the other CPU column). Busy-polling is off by default: on a "
              "saturated server's CPU the polling takes time the server needs "
              "(topologies/README.md).", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=REPO / "docs/bench-wan.md")
    # Many short alternating pairs: other users' load on this machine moves by the second.
    parser.add_argument("--reps", type=int, default=6)
    parser.add_argument("--seconds", type=int, default=3)
    args = parser.parse_args()
    load_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    arms = [("veth", 0), ("userspace", BUSY_POLL_US), ("userspace", 0)]
    runs = [one_run(backend, busy_poll_us, args.seconds)
            for _ in range(args.reps) for backend, busy_poll_us in arms]
    load_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    text = table(runs, [label(*arm) for arm in arms], load_before, load_after, args.seconds)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
