"""`make bench-ktrace-hooks`: what wb-ktrace's hooks cost before its programs do any work,
beside what tracing costs whole; docs/bench-ktrace-hooks.md.

bench-ktrace's quickstart point (wb-server, epoll, 50 hot connections offering 40,000 req/s
over loopback, server on CPU 0, wb-sclient on CPU 1) held for the whole measurement; in each
round three windows of the server's CPU, in an order that turns from round to round:
- untraced;
- hooks: wb-ktrace's programs attached but not counting (told to start counting at an instant
  past the window, each returns at its first test): what the kernel's hooks cost, the
  system-call tracepoints' slow path, the tracepoints and BPF's dispatch of a program;
- traced: wb-ktrace counting, as `kernel_trace: true` runs it;
- hooks of one group: as hooks, with only one group of tracepoints attached (`wb-ktrace
  --hooks`): the system-call pair (sys_enter, sys_exit), the scheduler's switch, the softirqs'
  entry and exit, the packets' receive and transmit: which of them costs most.
A change is a window's server CPU over the untraced one's of the same round; the page gives
the median over rounds. Each window's server CPU is the sum of its threads' run time
(/proc/PID/task/*/schedstat), the generator's likewise; steal and the machine's other load
are written beside.

    .venv/bin/python scripts/bench_ktrace_hooks.py [--rounds 7] [--render DATA.json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from clients.paths import binary  # noqa: E402
from harness.manifest import git_revision  # noqa: E402

DATA_DIR = REPO / "results" / "bench" / "bench-ktrace-hooks"
PAGE = REPO / "docs" / "bench-ktrace-hooks.md"
# wb-ktrace's groups of tracepoints (its --hooks), each alone in an arm of its own
GROUPS = ("calls", "switch", "softirq", "packets")
ARMS = ("untraced", "hooks", "traced", *(f"hooks {group}" for group in GROUPS))
SERVER_CPU, GENERATOR_CPU = 0, 1
RATE_RPS, HOT_CONNS = 40_000, 50
WINDOW_S = 3.0
SETTLE_S = 0.5  # after attaching or detaching, before a window opens
TARGET_PCT = 5.0  # tracing's goal: at most 5 % more of the server's CPU at 40,000 req/s


def run_ns(pid: int) -> int:
    """The process's threads' time on a CPU so far (schedstat's first field)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        total += int((task / "schedstat").read_text().split()[0])
    return total


def cpu_ticks() -> dict[str, list[int]]:
    """/proc/stat's per-CPU counters: cpuN -> [user, nice, system, idle, iowait, irq, softirq,
    steal]."""
    return {line.split()[0]: [int(v) for v in line.split()[1:9]]
            for line in Path("/proc/stat").read_text().splitlines() if line.startswith("cpu")}


def window(server: int, generator: int) -> dict[str, float]:
    """One WINDOW_S window: each process's CPU and each CPU's steal and busy time, in %."""
    ticks0, server0, generator0 = cpu_ticks(), run_ns(server), run_ns(generator)
    start = time.monotonic()
    time.sleep(WINDOW_S)
    ticks1, server1, generator1 = cpu_ticks(), run_ns(server), run_ns(generator)
    seconds = time.monotonic() - start
    measured = {"server_cpu_pct": 100 * (server1 - server0) / 1e9 / seconds,
                "generator_cpu_pct": 100 * (generator1 - generator0) / 1e9 / seconds}
    for cpu in (SERVER_CPU, GENERATOR_CPU):
        delta = [b - a for a, b in zip(ticks0[f"cpu{cpu}"], ticks1[f"cpu{cpu}"], strict=True)]
        total = sum(delta) or 1
        measured[f"steal_cpu{cpu}_pct"] = 100 * delta[7] / total
        measured[f"busy_cpu{cpu}_pct"] = 100 * (total - delta[3] - delta[4]) / total
    return measured


class Tracer:
    """wb-ktrace on the server's tree, driven on stdin, loaded and off the server's CPU."""

    def __init__(self, server: int, group: str | None = None) -> None:
        only = ["--hooks", group] if group else []
        self.proc = subprocess.Popen(
            ["taskset", "-c", str(GENERATOR_CPU), str(binary("wb-ktrace")), "--pid",
             str(server), *only], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._expect("ready")

    def _expect(self, line: str) -> None:
        got = self.proc.stdout.readline().strip()
        if got != line:
            raise SystemExit(f"wb-ktrace said {got!r}, not {line!r}")

    def _send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def hooks(self) -> None:
        """Attached, told to count from an instant an hour away: its programs run and return."""
        self._send(f"start {time.clock_gettime_ns(time.CLOCK_MONOTONIC) + 3600 * 10**9}")

    def count(self) -> None:
        self._send("start")
        self._expect("started")

    def document(self) -> dict:
        self._send("stop")
        return json.loads(self.proc.stdout.readline())

    def end(self) -> None:
        self.proc.kill()
        self.proc.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def measure(rounds: int) -> dict:
    port = free_port()
    server = subprocess.Popen([str(binary("wb-server")), "--dispatch", "epoll", "--accept",
                               "multi", "--reply-bytes", "92", "--listen",
                               f"127.0.0.1:{port}", "--cpu", str(SERVER_CPU)])
    time.sleep(0.3)
    seconds = rounds * len(ARMS) * (WINDOW_S + 2 * SETTLE_S + 1) + 10
    generator = subprocess.Popen(
        [str(binary("wb-sclient")), "--target", f"127.0.0.1:{port}", "--hot-conns",
         str(HOT_CONNS), "--rate", str(RATE_RPS), "--duration", str(seconds), "--warmup", "1",
         "--cpu", str(GENERATOR_CPU), "--json", os.devnull], stdout=subprocess.DEVNULL)
    load = os.getloadavg()
    windows = []
    try:
        time.sleep(2)
        for round_ in range(rounds):
            for turn in range(len(ARMS)):
                arm = ARMS[(round_ + turn) % len(ARMS)]
                group = arm.removeprefix("hooks ") if arm.startswith("hooks ") else None
                tracer = None if arm == "untraced" else Tracer(server.pid, group)
                events = None
                try:
                    if tracer is not None:
                        tracer.count() if arm == "traced" else tracer.hooks()
                    time.sleep(SETTLE_S)
                    measured = window(server.pid, generator.pid)
                    if arm == "traced":
                        counted = tracer.document()
                        events = counted["events"]["runs"] / (counted["window_ns"] / 1e9)
                finally:
                    if tracer is not None:
                        tracer.end()
                windows.append({"round": round_, "arm": arm, **measured,
                                "events_per_s": events})
                time.sleep(SETTLE_S)
                print(f"round {round_} {arm:9} server {measured['server_cpu_pct']:.1f} %",
                      flush=True)
        if generator.poll() is not None or server.poll() is not None:
            raise SystemExit("the generator or the server ended before the windows did")
    finally:
        for proc in (generator, server):
            proc.kill()
            proc.wait()
    return {"started_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "revision": git_revision(), "kernel": os.uname().release,
            "load_average": load, "rounds": rounds, "window_s": WINDOW_S,
            "rate_rps": RATE_RPS, "hot_conns": HOT_CONNS, "windows": windows}


def changes(data: dict, arm: str, metric: str) -> list[float]:
    """Per round: the arm's window over the untraced one's, in %."""
    by = {(w["round"], w["arm"]): w for w in data["windows"]}
    return [100 * (by[(r, arm)][metric] / by[(r, "untraced")][metric] - 1)
            for r in range(data["rounds"])]


def page(data: dict, source: Path) -> str:
    windows = data["windows"]
    steal = max(max(w["steal_cpu0_pct"], w["steal_cpu1_pct"]) for w in windows)
    lines = [
        "# bench-ktrace-hooks: what wb-ktrace's hooks cost before its programs work", "",
        f"`{source.relative_to(REPO)}`, measured {data['started_at']} on kernel "
        f"{data['kernel']}, wanbench {data['revision'][:7]}; load average at start "
        f"{', '.join(f'{v:.2f}' for v in data['load_average'])}; steal at most {steal:.1f} % "
        "of a window on either CPU. Generated by `make bench-ktrace-hooks` "
        "(scripts/bench_ktrace_hooks.py, whose docstring says how).", "",
        f"wb-server (epoll, 0 idle connections) on CPU {SERVER_CPU}, wb-sclient's "
        f"{data['hot_conns']} connections offering {data['rate_rps']:,} req/s over loopback on "
        f"CPU {GENERATOR_CPU}, {data['rounds']} rounds of {len(arms_of(data))} "
        f"{data['window_s']:g} s windows: untraced, hooks (wb-ktrace's programs attached, each "
        "returning at its first test), traced (wb-ktrace counting)"
        + (", and hooks of one group of tracepoints only (`wb-ktrace --hooks`): calls "
           "(sys_enter and sys_exit, every system call of every task), switch "
           "(sched_switch), softirq (softirq_entry and _exit), packets (netif_receive_skb, "
           "net_dev_xmit)" if len(arms_of(data)) > 3 else "")
        + ". A change is against the untraced window of the same round.", "",
        "| arm | server CPU % (median) | change (median) | change (rounds) | generator CPU % "
        "(median) | change (median) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for arm in arms_of(data):
        mine = [w for w in windows if w["arm"] == arm]
        server = statistics.median(w["server_cpu_pct"] for w in mine)
        generator = statistics.median(w["generator_cpu_pct"] for w in mine)
        if arm == "untraced":
            lines.append(f"| {arm} | {server:.1f} | – | – | {generator:.1f} | – |")
            continue
        server_change = changes(data, arm, "server_cpu_pct")
        generator_change = statistics.median(changes(data, arm, "generator_cpu_pct"))
        lines.append(f"| {arm} | {server:.1f} | {statistics.median(server_change):+.1f} % | "
                     f"{min(server_change):+.1f} to {max(server_change):+.1f} % | "
                     f"{generator:.1f} | {generator_change:+.1f} % |")
    hooks = statistics.median(changes(data, "hooks", "server_cpu_pct"))
    traced = statistics.median(changes(data, "traced", "server_cpu_pct"))
    events = statistics.median(w["events_per_s"] for w in windows if w["arm"] == "traced")
    lines += [
        "",
        "wb-sclient polls before each send that is due (it reads near 100 % of its CPU in "
        "every arm, docs/bench-clients.md), so its CPU says little here; the server's is the "
        "measure.", "",
        f"Of tracing's {traced:+.1f} % of the server's CPU, the hooks alone are {hooks:+.1f} % "
        f"and the programs' work the rest, {traced - hooks:+.1f} % ({events:,.0f} program "
        f"runs a second, all CPUs). Goal: tracing at most {TARGET_PCT:g} % of the server's "
        f"CPU: {'met' if traced <= TARGET_PCT else 'NOT met'}"
        + ("" if hooks <= TARGET_PCT else
           "; the hooks alone are over it, so no program body can meet it here") + ".",
        "",
        *each_group(data),
    ]
    return "\n".join(lines)


def arms_of(data: dict) -> list[str]:
    """The arms the measurement had, in ARMS' order (an earlier one had no group arms)."""
    measured = {w["arm"] for w in data["windows"]}
    return [arm for arm in ARMS if arm in measured]


def each_group(data: dict) -> list[str]:
    """Each group's hooks alone against all of them, and those over the goal on their own."""
    groups = [arm for arm in arms_of(data) if arm.startswith("hooks ")]
    if not groups:
        return []
    alone = {arm.removeprefix("hooks "): changes(data, arm, "server_cpu_pct") for arm in groups}
    median = {group: statistics.median(rounds) for group, rounds in alone.items()}
    every = statistics.median(changes(data, "hooks", "server_cpu_pct"))
    told = "; ".join(f"{group} {median[group]:+.1f} % ({min(rounds):+.1f} to "
                     f"{max(rounds):+.1f})" for group, rounds in alone.items())
    over = [group for group in alone if median[group] > TARGET_PCT]
    return [f"Each group's hooks alone, median over rounds (the rounds' range): {told}; all "
            f"of them together {every:+.1f} %, against the groups' sum of "
            f"{sum(median.values()):+.1f} %. "
            + (f"Over the {TARGET_PCT:g} % goal on their own: {', '.join(over)}: a tracer "
               "that kept them could not meet it here." if over else
               f"None is over the {TARGET_PCT:g} % goal on its own."), ""]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--render", type=Path, help="a stored measurement: render it only")
    args = parser.parse_args()
    if args.render:
        source = args.render.resolve()
        data = json.loads(source.read_text())
    else:
        data = measure(args.rounds)
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        source = DATA_DIR / f"{data['started_at'].replace(':', '')}.json"
        source.write_text(json.dumps(data, indent=1) + "\n")
    PAGE.write_text(page(data, source))
    print(f"{PAGE.relative_to(REPO)} from {source.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
