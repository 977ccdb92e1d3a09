"""A/B: emulator CPU per packet forwarded, two wb-linkem builds, fixed-rate and closed loop.

    PYTHONPATH=. python ab.py ROUNDS BASE_DIR URING_DIR   (each DIR holds a wb-linkem)
"""

import glob
import json
import subprocess
import sys
import time
from pathlib import Path

import clients.paths
from harness.topology import bring_up, load_topology


def emulator_cpu_s(pid: int) -> float:
    tasks = glob.glob(f"/proc/{pid}/task/*/schedstat")
    return sum(int(Path(t).read_text().split()[0]) for t in tasks) / 1e9


def one(bindir: str, rate: int, secs: int) -> dict:
    clients.paths.BIN_DIR = Path(bindir)
    topology = load_topology("topologies/lan.yaml", {"links.lan.emulate_unshaped": "true"})
    h = bring_up(topology, "userspace", calibrate=False)
    with h:
        srv = h.address("server")
        server = subprocess.Popen([*h.exec_prefix("server"), "build/bin/wb-server",
                                   "--dispatch", "epoll", "--reply-bytes", "16",
                                   "--listen", f"{srv}:8080", "--cpu", "0"],
                                  stdout=subprocess.DEVNULL)
        time.sleep(0.3)
        pid = h.emulator_pids()[0]
        # as a run places it: off the server's CPU
        subprocess.run(["taskset", "-a", "-p", "-c", "1", str(pid)], capture_output=True)
        argv = [*h.exec_prefix("client"), "build/bin/wb-sclient", "--target", f"{srv}:8080",
                "--hot-conns", "50", "--rate", str(rate), "--duration", str(secs),
                "--warmup", "1", "--cpu", "1", "--json", "/tmp/ab-load.json"]
        if rate:
            argv += ["--coalesce-us", "1000"]
        load = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        time.sleep(1)
        c0, t0 = emulator_cpu_s(pid), time.monotonic()
        load.wait()
        c1, t1 = emulator_cpu_s(pid), time.monotonic()
        server.terminate()
        server.wait()
    doc = json.loads(Path("/tmp/ab-load.json").read_text())
    c = h.emulator_counters["lan"]
    reads = c["a_to_b"]["reads"] + c["b_to_a"]["reads"]
    wakes = c["a_to_b"]["wakeups"] + c["b_to_a"]["wakeups"]
    return {"cpu_pct": 100 * (c1 - c0) / (t1 - t0), "pkts_per_wake": reads / max(wakes, 1),
            "fwd": c["a_to_b"]["forwarded"] + c["b_to_a"]["forwarded"],
            "rps": doc["reply_rate_rps"],
            "us_per_packet": 1e6 * (c1 - c0) / (2 * doc["replies"]["total"])}


for rnd in range(int(sys.argv[1])):
    for name, bindir in (("base", sys.argv[2]), ("uring", sys.argv[3])):
        for rate in (40000, 0):
            print(json.dumps({"round": rnd, "build": name, "rate": rate,
                              **one(bindir, rate, 3)}), flush=True)
