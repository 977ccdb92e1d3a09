"""The base side against each candidate side: load, check comparable, find the run-to-run
term, compare, collect the report."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from harness.analysis.compare import compat, engine, noise, render, samples


class Refused(ValueError):
    """The runs are different experiments (and --force was not given), or a side mixes
    kernels, or a given noise record does not describe them."""


def _load_side(paths: list[Path], role: str) -> list[samples.Run]:
    return [run for path in paths for run in samples.load_runs(path, role)]


def _label_sides(sides: list[engine.Side]) -> None:
    """Kernel release per side, with its first run where two sides share a release:
    '6.18.44 (run 20261126T183855)', '6.18.44 (runs 20261126T183855 +2)'."""
    counts = Counter(side.first.kernel for side in sides)
    for side in sides:
        kernel = side.first.kernel
        side.label = kernel
        if counts[kernel] > 1:
            run = side.first.run_id.removesuffix(f"-{kernel}")  # run ids end with the kernel
            more = f"s {run} +{len(side.runs) - 1}" if len(side.runs) > 1 else f" {run}"
            side.label = f"{kernel} (run{more})"


def _check_side(side: engine.Side, role: str, force: bool, refused: list[str]) -> None:
    """A side is runs of one kernel, of one experiment (refused unless --force)."""
    first = side.first
    for run in side.runs[1:]:
        kernel = compat.kernel_differences(first.manifest, run.manifest)
        if kernel:
            raise Refused(f"{role} runs {first.path} and {run.path} ran different kernels "
                          f"({'; '.join(kernel)}); a side is the runs of one kernel: give each "
                          "kernel its own side")
        diff = compat.differences(first.manifest, run.manifest).refused
        if diff and not force:
            raise Refused(f"{role} runs {first.path} and {run.path} are different experiments: "
                          f"{'; '.join(diff)}; rerun with one scenario's settings, or give "
                          "--force to compare anyway")
        refused += diff


def _noise(base: engine.Side, given: Path | None, warnings: list[str]
           ) -> noise.NoiseRecord | None:
    """The noise record that describes the base's runs: the given one (which must), or one
    beside them (used only if it does)."""
    path = given or noise.beside(base.runs)
    if path is None:
        return None
    found = noise.read(path)
    problems = found.problems(base.first.manifest)
    if problems and given is not None:
        raise Refused(f"noise record {path} does not describe the base run {base.first.path}: "
                      f"{'; '.join(problems)}; record one from A/A runs of this experiment "
                      "with `wanbench noise RUN...`")
    if problems:
        warnings.append(f"noise record {path} not used, it describes other runs: "
                        f"{'; '.join(problems)}")
        return None
    return found


def build_report(base_paths: list[Path], cand_sides: list[list[Path]], options: engine.Options,
                 force: bool = False, noise_path: Path | None = None) -> render.Report:
    """Load the sides, check they are comparable, and compare every candidate side with the
    base side."""
    base = engine.Side(_load_side(base_paths, "BASE_RUN"))
    cands = [engine.Side(_load_side(paths, "CAND_RUN")) for paths in cand_sides]
    _label_sides([base, *cands])
    base_refused: list[str] = []
    _check_side(base, "base", force, base_refused)
    notes: list[str] = []
    record = _noise(base, noise_path, notes)
    report = render.Report(str(base.first.manifest["scenario_name"]), base)
    base_ids = set(base.run_ids)
    for cand in cands:
        scenario = base.first.manifest["scenario_name"]
        for run in cand.runs:
            if run.manifest["scenario_name"] != scenario:
                raise Refused(
                    f"different scenarios: base {scenario!r} ({base.first.path}) vs candidate "
                    f"{run.manifest['scenario_name']!r} ({run.path}); compare runs of the same "
                    "scenario")
            if run.run_id in base_ids:
                raise Refused(f"{run.path} is a base run itself; give a different candidate")
        refused = list(base_refused)
        _check_side(cand, "candidate", force, refused)
        diff = compat.differences(base.first.manifest, cand.first.manifest)
        if diff.refused and not force:
            raise Refused(
                f"candidate {cand.first.path} is a different experiment: "
                f"{'; '.join(diff.refused)}; rerun it with the base's settings, or give --force "
                "to compare anyway")
        diff.refused = list(dict.fromkeys(refused + diff.refused))
        comparison = engine.compare(base, cand, options, record)
        comparison.warnings[:0] = notes
        report.candidates.append(render.Candidate(comparison, diff, forced=bool(diff.refused)))
    return report
