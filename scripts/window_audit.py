"""`make bench-window`: the saturation sweeps run on the window's code, and docs/bench-window.md.

A point's numbers must describe one interval, on one clock, under the load the point says was
offered. This runs the scenarios that sweep past the server's capacity (BM98 Figs 3-6, BMD99
Fig 9, CM01 Figs 6-9) with the kernel trace on, into results/bench/window/<stamp>/, and audits
every record against what the window promises:

- steady state: no valid record whose server answered more than 1.1× the requests sent in
  its window (a backlog drained);
- the load it claims: at each curve's top offered rate, the window's sent rate within 2 % of
  the rate offered (the S-Client keeps offering past capacity);
- one clock: no in-kernel share of the server's on-CPU time over 100 %;
- one interval: every record carries each source's edges, and how far they were from the
  runner's.

The page is rendered from the stored tables only: `--render DIR` re-renders a measurement.

    .venv/bin/python scripts/window_audit.py [--wrap CMD] [--render DIR]
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clients.paths import REPO_ROOT  # noqa: E402
from clients.validity import CLOCK_OFFSET_FRACTION  # noqa: E402
from harness.analysis.derive import add_derived  # noqa: E402
from harness.results.format import WINDOW_SOURCES, edge_column  # noqa: E402

SCENARIOS = ("bm98-fig3-6-naive-vs-realistic", "bmd99-fig9-resp-time-vs-rate",
             "cm01-fig6-9-vs-rate")
KEPT = REPO_ROOT / "results/bench/window"
PAGE = REPO_ROOT / "docs/bench-window.md"
DRAINED = 1.1  # the bound: replies over the requests sent in the window
OFFERED = 0.02  # the bound: the top rate's sent rate within 2 % of the offered
PARAMETERS = ("server", "dispatch", "accept", "reply_bytes", "workers", "hot_conns",
              "cold_conns", "one_way_delay_ms", "generator")


def measure(stamp_dir: Path, wrap: str | None) -> None:
    """Each scenario once, traced, one repetition (a scratch run: the reference is re-run by
    `make reproduce`); the load and steal around each, beside it."""
    stamp_dir.mkdir(parents=True)
    for name in SCENARIOS:
        before = Path("/proc/loadavg").read_text().split()[:3]
        argv = [sys.executable, "-m", "harness.cli", "run", f"scenarios/{name}.yaml",
                "--out", str(stamp_dir), "--set", "kernel_trace=true", "--set",
                "repetitions=1", "--allow-invalid", "-q"]
        start = time.monotonic()
        status = subprocess.run((shlex.split(wrap) if wrap else []) + argv, cwd=REPO_ROOT,
                                check=False).returncode
        (stamp_dir / f"{name}.json").write_text(json.dumps({
            "status": status, "seconds": round(time.monotonic() - start, 1),
            "load_before": before, "load_after": Path("/proc/loadavg").read_text().split()[:3]}))


def points(stamp_dir: Path) -> pd.DataFrame:
    frames = [pd.read_parquet(path) for path in sorted(stamp_dir.glob("*/*/points.parquet"))]
    return add_derived(pd.concat(frames, ignore_index=True))


def audit(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per record: what each promise reads on it."""
    sent = frame["request_rate_rps"] * frame["window_s"]
    out = frame[["scenario", "dispatch", "cold_conns", "reply_bytes", "offered_rate_rps",
                 "valid", "invalid_codes"]].copy()
    out["replies_over_sent"] = frame["server_replies"] / sent.where(sent > 0)
    out["sent_over_offered"] = frame["request_rate_rps"] / frame["offered_rate_rps"]
    curve = frame[[c for c in PARAMETERS if c in frame]].apply(
        lambda row: "/".join(map(str, row)), axis=1)
    out["top_rate"] = frame["offered_rate_rps"] == frame.groupby(
        [frame["scenario"], curve])["offered_rate_rps"].transform("max")
    shares = [c for c in frame.columns if c.startswith("kernel_") and c.endswith("_share_pct")]
    out["max_kernel_share_pct"] = frame[shares].max(axis=1) if shares else float("nan")
    edges = [edge_column(s, e) for s in WINDOW_SOURCES for e in ("start", "end")]
    offsets = frame[[c for c in edges if c in frame]].abs()
    out["sources_with_edges"] = offsets.notna().sum(axis=1) // 2
    out["max_edge_offset_ms"] = offsets.max(axis=1)
    return out


def source_rows(frame: pd.DataFrame) -> list[str]:
    """Per source: how far its edges were from the runner's, and how often past the bound."""
    lines = []
    for source in WINDOW_SOURCES:
        start, end = (frame[edge_column(source, e)].abs() for e in ("start", "end"))
        bound_ms = 1e3 * CLOCK_OFFSET_FRACTION * frame["window_s"]
        over = ((start > bound_ms) | (end > bound_ms)).sum()
        lines.append(f"| {source} | {start.median():.1f} | {start.max():.1f} | "
                     f"{end.median():.1f} | {end.max():.1f} | {over} |")
    return lines


def render(stamp_dir: Path) -> str:
    frame = points(stamp_dir)
    rows = audit(frame)
    runs = {p.stem: json.loads(p.read_text()) for p in sorted(stamp_dir.glob("*.json"))}
    valid = rows[rows["valid"]]
    drained = valid[valid["replies_over_sent"] > DRAINED]
    top = rows[rows["top_rate"]]
    short = top[(top["sent_over_offered"] - 1).abs() > OFFERED]
    over = rows[rows["max_kernel_share_pct"] > 100]
    lines = [
        "# The window on the saturation sweeps (generated by scripts/window_audit.py)",
        "",
        f"Measured {stamp_dir.name} (UTC), one repetition of each scenario, `kernel_trace: "
        f"true`, from results/bench/window/{stamp_dir.name}/.",
        "",
        "| scenario | seconds | exit | load before | load after |",
        "| --- | ---: | ---: | --- | --- |",
        *(f"| {name} | {run['seconds']:.0f} | {run['status']} | "
          f"{' '.join(run['load_before'])} | {' '.join(run['load_after'])} |"
          for name, run in runs.items()),
        "",
        "| promise | records | holds on | fails on |",
        "| --- | ---: | ---: | ---: |",
        f"| valid records' server replies ≤ {DRAINED}× the requests sent in the window | "
        f"{len(valid)} | {len(valid) - len(drained)} | {len(drained)} |",
        f"| the top offered rate's sent rate within {OFFERED:.0%} of it | {len(top)} | "
        f"{len(top) - len(short)} | {len(short)} |",
        f"| no in-kernel share over 100 % of the server's on-CPU time | "
        f"{int(rows['max_kernel_share_pct'].notna().sum())} | "
        f"{int(rows['max_kernel_share_pct'].notna().sum()) - len(over)} | {len(over)} |",
        f"| every record carries each of the {len(WINDOW_SOURCES)} sources' edges | "
        f"{len(rows)} | {int((rows['sources_with_edges'] == len(WINDOW_SOURCES)).sum())} | "
        f"{int((rows['sources_with_edges'] < len(WINDOW_SOURCES)).sum())} |",
        "",
        f"Largest offset of a source's edge from the runner's: "
        f"{rows['max_edge_offset_ms'].max():.1f} ms (median "
        f"{rows['max_edge_offset_ms'].median():.1f} ms).",
        "",
        "## Each source's edges, off the runner's",
        "",
        f"|edge| in ms over the {len(rows)} records; a record is invalid (`window_disagrees`) "
        f"when a source is off by more than {CLOCK_OFFSET_FRACTION:.0%} of its window "
        f"(20 ms of a 2 s window).",
        "",
        "| source | start: median | start: max | end: median | end: max | records over 1 % |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        *source_rows(frame),
        "",
        "## Each record at a curve's top offered rate",
        "",
        "| scenario | dispatch | cold | reply B | offered/s | sent/offered | replies/sent | "
        "valid | reasons |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |",
        *(f"| {r.scenario} | {r.dispatch} | {r.cold_conns:.0f} | {r.reply_bytes:.0f} | "
          f"{r.offered_rate_rps:,.0f} | {r.sent_over_offered:.3f} | "
          f"{r.replies_over_sent:.3f} | {'yes' if r.valid else 'no'} | "
          f"{r.invalid_codes if isinstance(r.invalid_codes, str) else ''} |"
          for r in top.itertuples()),
        "",
        "## Invalid records, by reason",
        "",
        "| reason codes | records |",
        "| --- | ---: |",
        *(f"| {codes} | {count} |" for codes, count in
          rows.loc[~rows["valid"], "invalid_codes"].value_counts().items()),
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wrap", help="run each scenario inside this command (a lock)")
    parser.add_argument("--render", type=Path, help="render a stored measurement only")
    args = parser.parse_args()
    stamp_dir = args.render
    if stamp_dir is None:
        stamp_dir = KEPT / time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        measure(stamp_dir, args.wrap)
    PAGE.write_text(render(stamp_dir))
    print(f"{PAGE} from {stamp_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
