"""SIGKILLs `wanbench run` of a dumbbell-wan sweep at random moments, then `topo clean` and
`--resume`, and checks that nothing is left behind and nothing is lost or measured twice.

After each kill: `wanbench topo clean`, then no wb-server, wb-sclient, wb-linkem, unshare or
calibration agent of the run may remain, no namespace or TUN device that was not there
before. At the end the run is resumed to completion and points.parquet must hold every
point × repetition exactly once, in agreement with the point records.

    .venv/bin/python scripts/chaos_kill.py [--kills 20] [--seed 1] [--out DIR]

Needs root (namespaces). Prints one line per kill and a verdict; exit 0 when all held.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
WANBENCH = [sys.executable, "-m", "harness.cli"]
OURS = ("wb-server", "wb-sclient", "wb-linkem", "unshare")

SCENARIO = """
name: chaos
topology: {file: topologies/dumbbell-wan.yaml, set: {links.cold.delay_ms: 10}}
server: {dispatch: epoll, reply_bytes: 92}
hot: {generator: sclient, conns: 4, rate_rps: 300}
cold: {conns: 0}
sweep:
  server.dispatch: [poll, epoll]
  cold.conns: [0, 200]
repetitions: 10
warmup_s: 0.3
duration_s: 1
"""


def namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def tun_devices() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show", "type", "tun"], capture_output=True,
                         text=True).stdout
    return {line.split(":")[1].strip() for line in out.splitlines() if line.strip()}


def leftover_processes() -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            comm = (entry / "comm").read_text().strip()
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if comm in OURS or "rtt_agent" in argv:
            found.append(f"{entry.name} {argv.strip()[:80]}")
    return found


def run_dirs(root: Path) -> list[Path]:
    return [p.parent for p in root.glob("*/*/manifest.json")]


def start(out: Path, scenario: Path) -> subprocess.Popen:
    runs = run_dirs(out)
    args = ["run", "--resume", str(runs[0])] if runs else ["run", str(scenario), "--out",
                                                            str(out)]
    return subprocess.Popen(WANBENCH + args, cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def check_clean(baseline_ns: set[str], baseline_tun: set[str]) -> list[str]:
    """What a kill left after `topo clean` (waiting briefly for dying processes)."""
    subprocess.run(WANBENCH + ["topo", "clean"], cwd=REPO, capture_output=True, timeout=120)
    problems: list[str] = []
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        problems = ([f"process {p}" for p in leftover_processes()]
                    + [f"netns {n}" for n in namespaces() - baseline_ns]
                    + [f"tun {t}" for t in tun_devices() - baseline_tun])
        if not problems:
            break
        time.sleep(0.1)
    return problems


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-delay-s", type=float, default=8.0,
                        help="kill at a uniform random moment up to this long after start")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    out = args.out or Path(tempfile.mkdtemp(prefix="wanbench-chaos-"))
    scenario = out / "chaos.yaml"
    out.mkdir(parents=True, exist_ok=True)
    scenario.write_text(SCENARIO)
    baseline_ns, baseline_tun = namespaces(), tun_devices()
    if leftover_processes():
        print(f"refusing to start: processes already running: {leftover_processes()}")
        return 2
    failures = kills = attempt = 0
    # 40 point x repetitions outlast 20 kills (about one record per attempt); a run that
    # finishes before its kill is not a kill, so attempts go on until enough have landed
    while kills < args.kills and attempt < 3 * args.kills:
        attempt += 1
        proc = start(out, scenario)
        delay = rng.uniform(0.2, args.max_delay_s)
        try:
            proc.wait(delay)
            status = f"finished first (exit {proc.returncode})"
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            status = "killed"
            kills += 1
        runs = run_dirs(out)
        done = len(list((runs[0] / "points").glob("*.json"))) if runs else 0
        problems = check_clean(baseline_ns, baseline_tun)
        failures += bool(problems)
        print(f"attempt {attempt:2d} at {delay:5.2f} s: {status}, {done} records; "
              f"{'left: ' + ', '.join(problems) if problems else 'nothing left'}", flush=True)
        if proc.returncode == 0:
            break  # the sweep is complete: nothing more to kill
    final = subprocess.run(WANBENCH + (["run", "--resume", str(run_dirs(out)[0])]
                                       if run_dirs(out) else
                                       ["run", str(scenario), "--out", str(out)]),
                           cwd=REPO, capture_output=True, text=True, timeout=900)
    (run,) = run_dirs(out)
    manifest = json.loads((run / "manifest.json").read_text())
    expected = manifest["points"] * manifest["repetitions"]
    problems = check_complete(run, expected) + check_clean(baseline_ns, baseline_tun)
    if final.returncode != 0:
        problems.append(f"final resume exited {final.returncode}: {final.stderr[-500:]}")
    print(f"final resume: exit {final.returncode}; {run}")
    if kills < args.kills:
        problems.append(f"only {kills} of {args.kills} kills landed before the sweep finished")
    verdict = "held" if not problems and not failures else "FAILED"
    print(f"verdict: {verdict}: {kills} kills in {attempt} attempts, {failures} left something "
          f"behind; "
          f"{'; '.join(problems) or f'all {expected} point × repetition exactly once'}")
    return 0 if verdict == "held" else 1


if __name__ == "__main__":
    sys.exit(main())
