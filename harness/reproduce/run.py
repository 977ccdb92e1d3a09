"""Run every reproduction scenario from one revision, within a time budget, into one folder.

The scenario files themselves hold the papers' axes, repetitions and windows (chosen so that
all of them fit REPRODUCE_BUDGET_S on a 2-CPU machine); this module only runs them in turn,
times them, and, once every one finished, leaves in the folder nothing older than this run.
`quick` shrinks each sweep axis to its first level and each point to one short repetition:
a smoke test of the whole pipeline, not a reproduction; its consecutive scenarios on one
topology share one bring-up and calibration. A reproduction brings up and calibrates each
scenario's topology right before it runs.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from clients.atomic import write_atomic
from clients.paths import REPO_ROOT
from clients.spec import settling_s
from harness import interrupts
from harness.analysis.figures import SPECS
from harness.manifest import git_revision
from harness.reproduce import beyond
from harness.results.runset import find_runs
from harness.runner.display import PlainDisplay, RunDisplay
from harness.runner.held import hold_key
from harness.runner.outcome import RunRequest
from harness.runner.refusal import EXIT_REFUSED, RunRefused
from harness.runner.run import TopologyKeeper, pending
from harness.runner.scenario_run import run_scenario
from harness.scenario import Range, Scenario, Values, load, points

REPRODUCE_BUDGET_S = 35 * 60  # the reproduction's budget for all targets on this 2-CPU machine
# What a point × repetition costs beyond warm-up and window (start-up, samplers, stopping),
# and each of its cold connections (opened, confirmed held, closed): a least-squares fit to
# the 16 scenarios' times in one full `make reproduce` on this machine (29.5 min in all;
# the fit is within 25 % of each scenario's time but bm98-ufalloc's, +35 %: its 15,000
# cold connections are local, not across the emulated WAN, and cost less each). Their ramp
# (cold.conns / cold.ramp_rps) is charged besides: the fit left it out, and cm01-fig6-9's
# 6,000 at 1,000/s made it 1,013 s against 596 estimated in the 43.6-minute reproduction;
# with the ramp, that run's scenarios are estimated at 2,621 s against its 2,613. A point
# that runs on the previous point's server and cold connections (hold_server_across_hot)
# pays neither.
POINT_OVERHEAD_S = 0.5
COLD_CONN_S = 0.00025
# A stream connection opens inside its point's warm-up (the scenario sizes it) and costs
# only its closing beyond it: cpp-fig5-beyond-llc's 149,508 took 43 s, 7 s over its windows,
# warm-ups, point overheads and start-up.
STREAM_CONN_S = 0.00005
QUICK = ["repetitions=1", "duration_s=0.5"]
QUICK_WARMUP_S = 0.3  # where the scenario's generator settles sooner (clients.spec.settling_s)
SUMMARY = "reproduce.json"


class ReproduceError(RuntimeError):
    """Refused before anything ran (the message names the fix)."""


@dataclass
class ScenarioRun:
    scenario: str
    points: int
    repetitions: int
    estimate_s: float
    seconds: float | None = None
    exit_code: int | None = None
    run_dir: str | None = None
    revision: str | None = None


def earlier_runs(out: Path, quick: bool) -> list[ScenarioRun]:
    """The scenarios out/reproduce.json recorded (of the same kind, quick or not): an --only
    call keeps the others' entries, each with the revision that ran it."""
    try:
        summary = json.loads((out / SUMMARY).read_text())
    except (OSError, ValueError):
        return []
    if summary.get("quick") != quick:
        return []
    return [ScenarioRun(**{"revision": summary.get("revision"), **entry})
            for entry in summary.get("scenarios", [])]


def scenario_paths() -> list[Path]:
    """Each reproduction scenario once, in the order of the targets, then the sweeps beyond
    the papers (harness.reproduce.beyond): what --only may name and the summary's order."""
    names = dict.fromkeys([*(spec.scenario for spec in SPECS), *beyond.SCENARIOS])
    return [REPO_ROOT / "scenarios" / f"{name}.yaml" for name in names]


def papers_paths() -> list[Path]:
    """What a reproduction runs unless told --only: the papers' targets, which alone fill
    REPRODUCE_BUDGET_S (the sweeps beyond them are `make beyond`)."""
    return [path for path in scenario_paths() if path.stem not in beyond.SCENARIOS]


def quick_overrides(path: Path) -> list[str]:
    """Every sweep axis at its first level (an axis's column name kept), one short repetition."""
    scenario = load(path)
    hot = scenario.hot
    warmup = max(QUICK_WARMUP_S, settling_s(hot.overload, hot.connect_timeout_s,
                                            hot.response_timeout_s))
    sets = [*QUICK, f"warmup_s={warmup:g}"]
    for axis, values in scenario.sweep.items():
        if isinstance(values, Range):
            first: object = {"values": [values.values()[0]], "as": values.as_}
        elif isinstance(values, Values):
            first = {"values": values.values[:1], "as": values.as_}
        else:
            first = values[:1]
        sets.append(f"sweep.{axis}={json.dumps(first)}")
    return sets


def grouped_by_topology(paths: list[Path]) -> list[Path]:
    """The scenarios on one topology next to each other, each topology where it first comes:
    a quick run keeps a topology up across consecutive scenarios (TopologyKeeper), so each is
    brought up and calibrated once."""
    topologies = [json.dumps(load(path).topology.model_dump(mode="json"), sort_keys=True)
                  for path in paths]
    first = {topology: index for index, topology in reversed(list(enumerate(topologies)))}
    return [path for _, path in sorted(zip(topologies, paths, strict=True),
                                       key=lambda pair: first[pair[0]])]


def _estimate_s(scenario: Scenario) -> float:
    """The scenario's point × repetitions in the order they run, each charged its cold
    connections only when it opens them (not carried over from the previous one)."""
    total, previous = 0.0, None
    for point, repetition in pending(scenario, set()):
        cfg = point.config
        key = hold_key(scenario, point, repetition)
        opened = 0 if key is not None and key == previous else cfg.cold.conns
        previous = key
        total += (cfg.warmup_s + cfg.duration_s + POINT_OVERHEAD_S
                  + opened * COLD_CONN_S + opened / cfg.cold.ramp_rps
                  + (cfg.stream.conns * STREAM_CONN_S if cfg.stream else 0))
    return total


def plan(paths: list[Path], quick: bool) -> list[ScenarioRun]:
    planned = []
    for path in paths:
        scenario = load(path, quick_overrides(path) if quick else None)
        planned.append(ScenarioRun(path.stem, len(points(scenario)), scenario.repetitions,
                                   _estimate_s(scenario)))
    return planned


def check_revision(allow_dirty: bool) -> str:
    revision = git_revision() or "unknown"
    if revision.endswith("-dirty") and not allow_dirty:
        raise ReproduceError("the working tree has uncommitted changes: commit them (the "
                             "reference must come from one clean revision) or pass "
                             "--allow-dirty for a trial run")
    return revision


def _run_one(path: Path, out: Path, quick: bool, display: RunDisplay,
             keeper: TopologyKeeper | None) -> tuple[int, str | None]:
    """The scenario's run (in this process: a stop signal tears it down, keeps its points
    and then stops the reproduction too): its exit status and run directory."""
    request = RunRequest(scenario=path, out=out, allow_invalid=True,
                         sets=tuple(quick_overrides(path)) if quick else ())
    try:
        result = run_scenario(request, display, keeper=keeper)
    except RunRefused as exc:
        display.warning(f"{path.stem}: {exc}")
        return EXIT_REFUSED, None
    if result.stop is not None and result.stop.signum is not None:
        raise interrupts.Interrupted(result.stop.signum)
    return result.status, str(result.run_dir)


def replace_older_runs(out: Path, runs: list[ScenarioRun]) -> list[Path]:
    """Removes every earlier run of these scenarios under out: the folder then holds one
    revision's runs of them. Only called when all finished."""
    keep = {Path(r.run_dir) for r in runs if r.run_dir}
    removed = []
    for run in runs:
        for old in find_runs(out / run.scenario) if (out / run.scenario).exists() else []:
            if old not in keep:
                shutil.rmtree(old)
                removed.append(old)
    return removed


def prune_raw(out: Path) -> None:
    """The Parquet tables hold all the analysis reads; raw generator documents and per-point
    records would only make the committed reference larger."""
    for path in [*out.rglob("raw"), *out.rglob("points")]:
        if path.is_dir() and (path.parent / "manifest.json").is_file():
            shutil.rmtree(path)


def reproduce(out: Path, quick: bool = False, allow_dirty: bool = False,
              only: list[str] | None = None, log=print,
              display: RunDisplay | None = None) -> dict:
    """Runs the scenarios (the papers', or those named in `only`) into out, each shown on display,
    and returns the summary written to out/reproduce.json. Older runs are replaced only when
    every scenario exited 0 or 1 (measured, valid or not): an interrupted or refused one
    leaves them all."""
    revision = check_revision(allow_dirty)
    paths = [p for p in scenario_paths() if p.stem in only] if only else papers_paths()
    if quick:
        paths = grouped_by_topology(paths)
    if only and len(paths) != len(set(only)):
        known = ", ".join(p.stem for p in scenario_paths())
        raise ReproduceError(f"--only {' '.join(only)}: unknown scenario; known: {known}")
    runs = plan(paths, quick)
    estimate = sum(r.estimate_s for r in runs)
    log(f"{len(runs)} scenarios, {sum(r.points * r.repetitions for r in runs)} point × "
        f"repetitions, estimated {estimate / 60:.0f} min (budget "
        f"{REPRODUCE_BUDGET_S / 60:.0f} min), revision {revision}")
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    keeper = TopologyKeeper() if quick else None
    try:
        for path, run in zip(paths, runs, strict=True):
            log(f"== {run.scenario}: {run.points} points × {run.repetitions}, "
                f"~{run.estimate_s / 60:.1f} min")
            began = time.monotonic()
            run.exit_code, run.run_dir = _run_one(path, out, quick, display or PlainDisplay(),
                                                  keeper)
            run.seconds = time.monotonic() - began
            run.revision = revision
            if run.exit_code not in (0, 1):
                log(f"{run.scenario}: its run exited {run.exit_code}; stopping here "
                    "(earlier runs are kept)")
                break
    finally:
        if keeper is not None:
            keeper.close()
    finished = all(r.exit_code in (0, 1) for r in runs)
    if finished:
        replace_older_runs(out, runs)
    ran = {r.scenario for r in runs}
    kept = [r for r in earlier_runs(out, quick) if r.scenario not in ran] if only else []
    order = [p.stem for p in scenario_paths()]
    entries = sorted(kept + runs, key=lambda r: order.index(r.scenario)
                     if r.scenario in order else len(order))
    # revision, seconds and estimate are this call's; each scenario names its own revision
    summary = {"revision": revision, "quick": quick, "started_at": started,
               "seconds": time.time() - started, "budget_s": REPRODUCE_BUDGET_S,
               "estimate_s": estimate, "finished": finished,
               "revisions": sorted({r.revision for r in entries if r.revision}),
               "scenarios": [asdict(r) for r in entries]}
    write_atomic(out / SUMMARY, (json.dumps(summary, indent=2) + "\n").encode())
    return summary
