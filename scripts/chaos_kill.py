"""SIGKILLs `wanbench run` of a dumbbell-wan sweep with a CPU-budgeted server at random
moments, then `topo clean` and `--resume`, and checks that nothing is left behind, nothing is
lost or measured twice, and nothing outside the run directory is touched.

After each kill and `wanbench topo clean` none of the run's may remain: processes (found by a
marker in their environment, whatever their name), namespaces and CPU-budget cgroups (named
with a run prefix its ledgers had, or new since the start), TUN devices, ledger files, and
wb-ktrace's BPF programs, maps and links (the sweep traces each window in the kernel where
this machine allows it: `kernel_trace: true`). A record of a finished point must never
disappear; at the end the run is resumed to completion and points.parquet must hold every
point × repetition exactly once, in agreement with the point records. Every run and clean
works in a sentinel directory (its cwd) beside the results; files there and in the output
directory outside the run directory and the ledgers' state directory must not change.

The first --probe-kills attempts aim at the link-backend probe instead of a random moment:
once the run's ledger names its scratch namespace (`PREFIX-probe`), they send SIGINT or SIGKILL
(alternately, to the run's process group) within PROBE_JITTER_S of its inode being ledgered:
around `ip netns attach`, which makes the name and then mounts the namespace on it. A half-made
name is counted among the namespaces left, and so is any `ip netns list` complaint ("Peer
netns reference is invalid").

    .venv/bin/python scripts/chaos_kill.py [--kills 20] [--probe-kills 6] [--seed 1] [--out DIR]

Needs root (namespaces, cgroups). Prints one line per attempt and a summary; exit 0 when all
held.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.metrics import ktrace  # noqa: E402
from harness.topology.addressing import PREFIX_RE  # noqa: E402
from harness.topology.cgroups import CgroupError, cpu_hierarchy  # noqa: E402
from harness.topology.ledger import Ledger  # noqa: E402
from harness.topology.netns import names as netns_names  # noqa: E402

WANBENCH = [sys.executable, "-m", "harness.cli"]
MARKER = "WANBENCH_CHAOS_MARK"  # in the environment of every process a run starts
SETTLE_S = 3.0  # dying processes may take this long to be gone after `topo clean`
PROBE_JITTER_S = 0.01  # a probe-window kill lands this long at most after the inode is ledgered
PROBE_WAIT_S = 20.0  # how long a probe-window attempt waits for the probe's ledger entry

SCENARIO = """
name: chaos
topology: {file: topologies/dumbbell-wan.yaml, set: {links.cold.delay_ms: 10}}
server: {dispatch: epoll, reply_bytes: 92}
hot: {generator: sclient, conns: 4, rate_rps: 300}
kernel_trace: true
cold: {conns: 0}
cpus: {server: 0, generator: 1, server_budget_pct: 60}
sweep:
  server.dispatch: [poll, epoll]
  cold.conns: [0, 200]
repetitions: 20
warmup_s: 0.3
duration_s: 1
"""


class Campaign:
    """The directories of one campaign, the environment its commands run in, and what was
    there before it started."""

    def __init__(self, out: Path):
        self.out, self.state, self.sentinel = out, out / "state", out / "sentinel"
        self.results, self.scenario = out / "results", out / "chaos.yaml"
        for directory in (self.state, self.sentinel, self.results):
            directory.mkdir(parents=True, exist_ok=True)
        self.scenario.write_text(SCENARIO)
        (self.sentinel / "keep.txt").write_text("a run must not touch this\n")
        self.mark = secrets.token_hex(8)
        self.env = {**os.environ, MARKER: self.mark, "WANBENCH_TOPO_STATE": str(self.state),
                    "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                                os.environ.get("PYTHONPATH")]))}
        self.prefixes: set[str] = set()  # every run prefix its ledgers were seen with
        self.baseline_ns, self.baseline_tun = set(netns_names()), tun_devices()
        self.baseline_groups = set(cgroup_names())

    def wanbench(self, args: list[str], **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(WANBENCH + args, cwd=self.sentinel, env=self.env,
                              capture_output=True, text=True, **kwargs)

    def start(self) -> subprocess.Popen:
        return subprocess.Popen(WANBENCH + self.run_args(), cwd=self.sentinel, env=self.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                process_group=0)  # a group of its own, as a shell gives it

    def run_args(self) -> list[str]:
        """Resume the run once it has a manifest. Invalid points are not this test's concern
        (the machine is shared): they are kept like valid ones."""
        start = (["--resume", str(self.run_dir())] if self.run_dir() else
                 [str(self.scenario), "--out", str(self.results)])
        return ["run", *start, "--allow-invalid"]

    def budget_up(self) -> bool:
        """A server's CPU-budget group is recorded (the run is in a point)."""
        return any(ledger.entries("cgroup") for ledger in Ledger.load_all(self.state))

    def run_dir(self) -> Path | None:
        runs = [p.parent for p in self.results.glob("*/*/manifest.json")]
        return runs[0] if runs else None

    def records(self) -> set[str]:
        run = self.run_dir()
        return {p.name for p in (run / "points").glob("*.json")} if run else set()

    def note_prefixes(self) -> None:
        self.prefixes |= {p.stem for p in self.state.glob("wb*.json")}

    def leftovers(self) -> dict[str, list[str]]:
        """What the campaign's runs left, by kind (after waiting briefly for the dying)."""
        deadline = time.monotonic() + SETTLE_S
        while True:
            found = {"processes": marked_processes(self.mark),
                     "namespaces": [n for n in set(netns_names()) - self.baseline_ns
                                    if n.split("-")[0] in self.prefixes
                                    or PREFIX_RE.fullmatch(n.split("-")[0])]
                     + invalid_netns_references(),
                     "cgroups": [g for g in cgroup_names()
                                 if g in self.prefixes or (g not in self.baseline_groups
                                                           and PREFIX_RE.fullmatch(g))],
                     "tun devices": sorted(tun_devices() - self.baseline_tun),
                     "ledger files": sorted(p.name for p in self.state.iterdir()),
                     "bpf objects": ktrace.loaded_objects()}
            if not any(found.values()) or time.monotonic() > deadline:
                return {kind: items for kind, items in found.items() if items}
            time.sleep(0.1)

    def clean(self) -> dict[str, list[str]]:
        """`topo clean`, then what it left; lines where clean says it left something."""
        self.note_prefixes()
        cleaned = self.wanbench(["topo", "clean"], timeout=120)
        left = self.leftovers()
        refused = [line for line in cleaned.stdout.splitlines()
                   if "not ours" in line or "could not remove" in line]
        if cleaned.returncode != 0 or refused:
            left["clean said"] = refused + ([cleaned.stderr.strip()[-300:]]
                                            if cleaned.returncode else [])
        return left

    def outside(self) -> dict[str, tuple[int, int]]:
        """Files outside run directories and the state directory: path -> (size, mtime). (A
        kill before the manifest leaves a run directory the next attempt does not resume.)"""
        runs = list(self.results.glob("*/*"))
        snapshot = {}
        for path in self.out.rglob("*"):
            if path.is_dir() or path.is_relative_to(self.state) or any(
                    path.is_relative_to(run) for run in runs):
                continue
            stat = path.stat()
            snapshot[str(path.relative_to(self.out))] = (stat.st_size, stat.st_mtime_ns)
        return snapshot


def invalid_netns_references() -> list[str]:
    """`ip netns list`'s complaint about a name with no namespace mounted on it, if any."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return [f"ip netns list: {line}" for line in set(listed.stderr.splitlines())
            if "Peer netns reference is invalid" in line]


def probe_about_to_be_named(state: Path) -> bool:
    """Whether a run's ledger holds the inode of the link-backend probe's scratch namespace:
    what netns.create records right before `ip netns attach` names it."""
    return any(entry.get("name", "").endswith("-probe") and "inode" in entry
               for ledger in Ledger.load_all(state) for entry in ledger.entries("netns"))


def kill_in_probe(campaign: Campaign, proc: subprocess.Popen, rng: random.Random,
                  signum: int) -> str | None:
    """Sends signum to the run's process group (as a terminal's ^C reaches `ip` too) once the
    probe's namespace is about to be named; None when the run got past the probe (or ended)
    without one, e.g. a machine that probes no netem."""
    deadline = time.monotonic() + PROBE_WAIT_S
    while not probe_about_to_be_named(campaign.state):
        if proc.poll() is not None or time.monotonic() > deadline:
            return None
        time.sleep(0.0005)
    time.sleep(rng.uniform(0, PROBE_JITTER_S))
    os.killpg(proc.pid, signum)
    proc.wait()
    return f"{signal.Signals(signum).name} in the probe (exit {proc.returncode})"


def tun_devices() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show", "type", "tun"], capture_output=True,
                         text=True).stdout
    return {line.split(":")[1].strip() for line in out.splitlines() if line.strip()}


def cgroup_names() -> list[str]:
    """The groups under wanbench's parent in the CPU hierarchy."""
    try:
        parent = cpu_hierarchy()[1]
    except CgroupError:
        return []
    return [p.name for p in parent.iterdir() if p.is_dir()] if parent.is_dir() else []


def marked_processes(mark: str) -> list[str]:
    needle = f"{MARKER}={mark}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        found.append(f"{entry.name} {argv.strip()[:80]}")
    return found


def check_complete(run: Path, expected: int) -> list[str]:
    points = pd.read_parquet(run / "points.parquet")
    records = {p.stem: json.loads(p.read_text())["point"] for p in (run / "points").glob("*.json")}
    problems = []
    keys = points[["point_id", "repetition"]].apply(tuple, axis=1)
    if keys.duplicated().any():
        problems.append(f"duplicated rows: {keys[keys.duplicated()].tolist()}")
    if len(points) != expected or len(records) != expected:
        problems.append(f"{len(points)} rows and {len(records)} records, expected {expected}")
    for _, row in points.iterrows():
        record = records.get(f"{row['point_id']}-r{row['repetition']}")
        if record is None or record.get("reply_rate_rps") != (
                None if pd.isna(row.get("reply_rate_rps")) else row["reply_rate_rps"]):
            problems.append(f"row {row['point_id']} r{row['repetition']} disagrees with its "
                            f"record")
    return problems


def describe(left: dict[str, list[str]]) -> str:
    return "; ".join(f"{kind}: {', '.join(items)}" for kind, items in left.items())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--probe-kills", type=int, default=6,
                        help="of the kills, how many aim at the link-backend probe")
    parser.add_argument("--seed", type=int, default=1)
    # bringing the topology up and calibrating it takes 2-7 s here: later kills land in points
    parser.add_argument("--max-delay-s", type=float, default=14.0,
                        help="kill at a uniform random moment up to this long after start")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    campaign = Campaign(args.out or Path(tempfile.mkdtemp(prefix="wanbench-chaos-")))
    leaks: dict[str, set[str]] = {}  # kind -> each distinct thing left after a clean
    lost: list[str] = []
    touched: set[str] = set()
    kills = attempt = in_points = probe_kills = 0
    finished = False
    # 80 point x repetitions outlast 20 kills (a few records per attempt); a run that
    # finishes before its kill is not a kill, so attempts go on until enough have landed
    while kills < args.kills and attempt < 3 * args.kills and not finished:
        attempt += 1
        before, outside = campaign.records(), campaign.outside()
        proc = campaign.start()
        delay = rng.uniform(0.2, args.max_delay_s)
        if kills < args.probe_kills:
            status = kill_in_probe(campaign, proc, rng, (signal.SIGINT, signal.SIGKILL)[kills % 2])
            if status is None:
                proc.kill()
                proc.wait()
                status = "killed, no probe seen"
            kills += 1
            probe_kills += 1
        else:
            try:
                proc.wait(delay)
                status = f"finished first (exit {proc.returncode})"
                finished = proc.returncode == 0  # the sweep is complete: nothing more to kill
            except subprocess.TimeoutExpired:
                budgeted = campaign.budget_up()
                proc.kill()
                proc.wait()
                status = f"killed {'in a point' if budgeted else 'outside points'}"
                kills += 1
                in_points += budgeted
        left = campaign.clean()
        for kind, items in left.items():
            leaks.setdefault(kind, set()).update(items)
        after = campaign.records()
        if before - after:
            lost.append(f"attempt {attempt}: records gone: {sorted(before - after)}")
        now = campaign.outside()
        touched |= {path for path in set(outside) | set(now) if outside.get(path) != now.get(path)}
        print(f"attempt {attempt:2d} at {delay:5.2f} s: {status}, {len(after)} records; "
              f"{'left: ' + describe(left) if left else 'nothing left'}", flush=True)
    outside = campaign.outside()
    final = campaign.wanbench(campaign.run_args(), timeout=1800)
    left = campaign.clean()
    for kind, items in left.items():
        leaks.setdefault(kind, set()).update(items)
    now = campaign.outside()
    touched |= {path for path in set(outside) | set(now) if outside.get(path) != now.get(path)}
    run = campaign.run_dir()
    problems = []
    if run is None:
        problems.append("no run directory")
    else:
        manifest = json.loads((run / "manifest.json").read_text())
        expected = manifest["points"] * manifest["repetitions"]
        lost += check_complete(run, expected)
    if final.returncode != 0:
        problems.append(f"final resume exited {final.returncode}: {final.stderr[-500:]}")
    if kills < args.kills:
        problems.append(f"only {kills} of {args.kills} kills landed before the sweep finished")
    print(f"final resume: exit {final.returncode}; {run}"
          f"{'; left: ' + describe(left) if left else ''}")
    print(f"kills: {kills} in {attempt} attempts ({probe_kills} aimed at the backend probe, "
          f"{in_points} in a point, the server's budget group up; "
          f"{kills - probe_kills - in_points} while bringing up or between points)")
    print("leaks: " + ", ".join(f"{kind} {len(leaks.get(kind, ()))}" for kind in
                                ("processes", "namespaces", "cgroups", "tun devices",
                                 "ledger files", "bpf objects", "clean said")))
    print(f"points lost: {len(lost)}" + (f" ({'; '.join(lost)})" if lost else
                                         " (every point x repetition exactly once)"))
    print(f"files touched outside the run dir: {len(touched)}"
          + (f" ({', '.join(sorted(touched))})" if touched else ""))
    if not ktrace.support().tracepoints:
        print(f"bpf: nothing was traced here ({ktrace.support().detail})")
    held = not (problems or lost or touched or leaks)
    print(f"verdict: {'held' if held else 'FAILED'}"
          + (f": {'; '.join(problems)}" if problems else ""))
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
