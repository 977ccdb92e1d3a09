"""One base run against each candidate: load, check comparable, compare, collect the report."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from harness.analysis.compare import compat, engine, render, samples


class Refused(ValueError):
    """Base and candidate are different experiments (and --force was not given)."""


def _label_runs(runs: list[samples.Run]) -> list[str]:
    """Kernel release per run, with the run id where two runs share a release."""
    counts = Counter(run.kernel for run in runs)
    return [run.kernel if counts[run.kernel] == 1 else f"{run.kernel} ({run.run_id})"
            for run in runs]


def _shape(run: samples.Run) -> str:
    reps = run.manifest.get("repetitions") or run.points["repetition"].nunique()
    duration = run.duration_s
    return f"{reps} repetition(s) x {duration:g} s" if duration else f"{reps} repetition(s)"


def build_report(base_path: Path, cand_paths: list[Path], options: engine.Options,
                 force: bool = False) -> render.Report:
    """Load the runs, check they are comparable, and compare every candidate with the base."""
    base = samples.load_run(base_path, "BASE_RUN")
    cands = [samples.load_run(path, "CAND_RUN") for path in cand_paths]
    labels = _label_runs([base, *cands])
    report = render.Report(str(base.manifest["scenario_name"]), base.run_id, labels[0],
                           _shape(base), base.duration_s)
    for cand, label in zip(cands, labels[1:], strict=True):
        if cand.manifest["scenario_name"] != base.manifest["scenario_name"]:
            raise Refused(
                f"different scenarios: base {base.manifest['scenario_name']!r} ({base.path}) vs "
                f"candidate {cand.manifest['scenario_name']!r} ({cand.path}); compare runs of "
                "the same scenario")
        if cand.run_id == base.run_id:
            raise Refused(f"{cand.path} is the base run itself; give a different candidate")
        diff = compat.differences(base.manifest, cand.manifest)
        if diff.refused and not force:
            raise Refused(
                f"candidate {cand.path} is a different experiment: {'; '.join(diff.refused)}; "
                "rerun it with the base's settings, or give --force to compare anyway")
        comparison = engine.compare(base, cand, options, labels[0], label)
        report.candidates.append(render.Candidate(comparison, diff, cand.run_id,
                                                  forced=bool(diff.refused)))
    return report
