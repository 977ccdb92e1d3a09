"""Every reproduction target's verdict on a set of runs (the newest run of its scenario)."""

from __future__ import annotations

from harness.analysis.figures import SPECS, FigureSpec
from harness.reproduce.capabilities import missing
from harness.reproduce.claims import CLAIMS
from harness.reproduce.history import PastVerdict, judge_history
from harness.reproduce.verdict import (
    ClaimResult,
    Measured,
    Status,
    TargetResult,
    combine,
    evaluate_claim,
)
from harness.results.runset import RunSet


def _not_run(spec: FigureSpec) -> TargetResult:
    """No run: NOT POSSIBLE HERE when this machine could test none of the claims anyway."""
    claims = CLAIMS[spec.id]
    absent = [missing(c.needs, None) for c in claims]
    if all(absent):
        results = [ClaimResult(c, Status.NOT_POSSIBLE, why)
                   for c, why in zip(claims, absent, strict=True)]
        return TargetResult(spec.id, spec.target, spec.scenario, Status.NOT_POSSIBLE,
                            claims=results, note="needs " + "; ".join(sorted(set(absent))))
    return TargetResult(spec.id, spec.target, spec.scenario, Status.NOT_RUN,
                        note=f"no run of {spec.scenario}")


def newest_run(spec: FigureSpec, runs: RunSet | None) -> RunSet | None:
    """The run a target is judged on: the newest of its scenario (None: no run)."""
    mine = runs.scenario(spec.scenario) if runs is not None else None
    if mine is None or mine.manifests.empty:
        return None
    return mine.newest()


def check_target(spec: FigureSpec, runs: RunSet | None) -> TargetResult:
    run = newest_run(spec, runs)
    if run is None:
        return _not_run(spec)
    measured = Measured(run.points, run.profiles)
    results = [evaluate_claim(claim, measured, missing(claim.needs, run))
               for claim in CLAIMS[spec.id]]
    return TargetResult(spec.id, spec.target, spec.scenario, combine(results),
                        run=str(run.manifests["run_id"].iloc[0]), claims=results)


def check_all(runs: RunSet | None) -> list[TargetResult]:
    return [check_target(spec, runs) for spec in SPECS]


def history_all(runs: RunSet | None) -> dict[str, list[PastVerdict]]:
    """Per target, each change of its check with its previous form's verdict on the run the
    target is judged on today."""
    out = {}
    for spec in SPECS:
        run = newest_run(spec, runs)
        out[spec.id] = judge_history(spec.id, None if run is None
                                     else Measured(run.points, run.profiles))
    return out
