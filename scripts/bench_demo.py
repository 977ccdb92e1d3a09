"""`make bench-demo`: `make demo` from fresh clones, several in a row, and docs/bench-demo.md.

Each clone is a `git clone` of this checkout's branch into a temporary directory, where `make
demo` runs as a user's would (its own .venv and build); `--wrap` runs each `make demo` inside
a command (e.g. a lock that holds the machine). Per clone it keeps, under
results/bench/bench-demo/<stamp>/clone-N/: the run's manifest and points table, and clone.json
(exit status, wall time, load average and CPU steal around `make demo`, and every
point × repetition measured again, with its reasons). The page is rendered from those files
only, so `--render STAMP_DIR` re-renders a stored measurement without measuring.

    .venv/bin/python scripts/bench_demo.py [--clones 3] [--wrap CMD] [--render DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clients.paths import REPO_ROOT  # noqa: E402

KEPT = REPO_ROOT / "results/bench/bench-demo"
PAGE = REPO_ROOT / "docs/bench-demo.md"
TEMPLATE = Path(__file__).with_name("bench_demo.md.j2")
# around `make demo`, inside the wrapper: load and /proc/stat's CPU lines before and after
MEASURED = ('cat /proc/loadavg /proc/stat > "$1/before"; s=$(date +%s.%N); '
            'make -s demo > "$1/demo.log" 2>&1; echo $? > "$1/rc"; e=$(date +%s.%N); '
            'cat /proc/loadavg /proc/stat > "$1/after"; echo "$s $e" > "$1/wall"')


def _steal_pct(before: str, after: str) -> dict[str, float]:
    """Each CPU's steal over the interval, % of its time (from /proc/stat's cpuN lines)."""
    def cpus(text: str) -> dict[str, list[int]]:
        return {f[0]: [int(v) for v in f[1:]] for line in text.splitlines()
                if (f := line.split()) and f[0].startswith("cpu") and f[0] != "cpu"}

    first, last = cpus(before), cpus(after)
    out = {}
    for name in last:
        delta = [b - a for a, b in zip(first[name], last[name], strict=True)]
        out[name] = round(100 * delta[7] / sum(delta), 2) if sum(delta) else 0.0
    return out


def _remeasured(run: Path) -> list[dict[str, Any]]:
    """Every attempt measured again: its point, repetition, attempt, codes and reason."""
    kept = []
    for path in sorted(run.glob("raw/*/attempt-*.json")):
        point = json.loads(path.read_text())["point"]
        kept.append({"point": path.parent.name, "dispatch": point.get("dispatch"),
                     "cold_conns": point.get("cold_conns"), "repetition": point["repetition"],
                     "attempt": int(path.stem.split("-")[1]),
                     "codes": point.get("invalid_codes"), "reason": point.get("invalid_reason"),
                     "generator_wait_others_pct": point.get("generator_wait_others_pct"),
                     "steal_generator_cpu_pct": point.get("steal_generator_cpu_pct"),
                     "other_generator_tasks": point.get("other_generator_tasks")})
    return kept


def measure_clone(branch: str, wrap: list[str], keep: Path) -> None:
    """One fresh clone's `make demo`, kept in keep/."""
    keep.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="wanbench-demo-") as tmp:
        clone = Path(tmp) / "wanbench"
        subprocess.run(["git", "clone", "-q", "--branch", branch, str(REPO_ROOT), str(clone)],
                       check=True)
        notes = Path(tmp) / "notes"
        notes.mkdir()
        # as a user's shell would run it: nothing of this checkout's Python on its paths
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        subprocess.run([*wrap, "sh", "-c", MEASURED, "measured", str(notes)], cwd=clone,
                       env=env, check=False)
        start, end = map(float, (notes / "wall").read_text().split())
        before, after = (notes / "before").read_text(), (notes / "after").read_text()
        runs = sorted((clone / "results/quickstart").glob("*/manifest.json"))
        run = runs[-1].parent if runs else None
        facts = {"branch": branch, "exit": int((notes / "rc").read_text()),
                 "wall_s": round(end - start, 1),
                 "load_before": before.split()[:3], "load_after": after.split()[:3],
                 "steal_pct": _steal_pct(before, after),
                 "run_id": run.name if run else None,
                 "remeasured": _remeasured(run) if run else [],
                 "log_tail": (notes / "demo.log").read_text().splitlines()[-20:]}
        if run is not None:
            for name in ("manifest.json", "points.parquet"):
                shutil.copy(run / name, keep / name)
        (keep / "clone.json").write_text(json.dumps(facts, indent=1) + "\n")


def _clone_rows(stamp: Path) -> list[dict[str, Any]]:
    rows = []
    done = [path.parent for path in stamp.glob("clone-*/clone.json")]
    for keep in sorted(done, key=lambda p: int(p.name.split("-")[1])):
        facts = json.loads((keep / "clone.json").read_text())
        points = (pd.read_parquet(keep / "points.parquet")
                  if (keep / "points.parquet").exists() else pd.DataFrame())
        manifest = (json.loads((keep / "manifest.json").read_text())
                    if (keep / "manifest.json").exists() else {})
        invalid = (points[~points["valid"].astype(bool)].to_dict("records")
                   if len(points) else [])
        rows.append({"name": keep.name, **facts, "points": points, "invalid": invalid,
                     "valid": int(points["valid"].sum()) if len(points) else 0,
                     "measured": len(points), "revision": manifest.get("git_revision", "")[:7],
                     "kernel": manifest.get("kernel", {}).get("release", "")})
    return rows


def _traced(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Every clone's select point × repetitions: the late sends beside who held CPU 1."""
    frames = [r["points"].assign(clone=r["name"]) for r in rows if len(r["points"])]
    if not frames:
        return pd.DataFrame()
    points = pd.concat(frames)
    columns = ["clone", "dispatch", "cold_conns", "repetition", "attempt", "late_sends",
               "generator_wait_pct", "generator_wait_others_pct", "steal_generator_cpu_pct",
               "other_generator_cpu_pct", "other_generator_tasks", "server_wait_pct",
               "reply_rate_rps", "valid"]
    return points[points["dispatch"] == "select"][columns]


def render(stamp: Path) -> str:
    rows = _clone_rows(stamp)
    traced = _traced(rows)
    # windows whose traced wait behind others read more than the whole wait (schedstat)
    over = (traced[traced["generator_wait_others_pct"] > traced["generator_wait_pct"]]
            if len(traced) else traced)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE.parent),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env.get_template(TEMPLATE.name).render(
        stamp=stamp.relative_to(REPO_ROOT), clones=rows, traced=traced, over=over,
        all_valid=all(r["valid"] == r["measured"] == 12 for r in rows),
        all_exit_0=all(r["exit"] == 0 for r in rows), pd=pd)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clones", type=int, default=3, help="fresh clones, one after another")
    parser.add_argument("--wrap", default="", help="a command each `make demo` runs inside "
                                                   "(e.g. a lock holding the machine)")
    parser.add_argument("--render", type=Path, metavar="DIR",
                        help="render this stored measurement (results/bench/bench-demo/STAMP) "
                             "instead of measuring")
    parser.add_argument("--out", type=Path, default=PAGE)
    args = parser.parse_args()
    if args.render:
        stamp = args.render.resolve()
        if not list(stamp.glob("clone-*/clone.json")):
            print(f"bench-demo: {args.render}: no clone-*/clone.json; fix: give a directory "
                  f"`make bench-demo` wrote under {KEPT.relative_to(REPO_ROOT)}/",
                  file=sys.stderr)
            return 2
    else:
        branch = subprocess.run(["git", "-C", str(REPO_ROOT), "branch", "--show-current"],
                                capture_output=True, text=True, check=True).stdout.strip()
        if not branch:
            print("bench-demo: no branch checked out; fix: check out the branch to clone",
                  file=sys.stderr)
            return 2
        stamp = KEPT / time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        for n in range(1, args.clones + 1):
            measure_clone(branch, shlex.split(args.wrap), stamp / f"clone-{n}")
    args.out.write_text(render(stamp))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
