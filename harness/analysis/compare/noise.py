"""The run-to-run term: how far a second run of the same kernel moves on this machine.

Repetitions within one run cannot tell it (they run minutes apart at most, interleaved, under
the same neighbours), so it is measured by A/A runs: several runs of one scenario with the
same kernel, recorded by `wanbench noise RUN...` as a noise record. Per point and metric it
holds the variance of a run's value (on the scale compare tests it) over those runs, with its
degrees of freedom, the machine, the runs' dates and what their experiment was. compare uses
it when the runs it compares are the same experiment on the same machine, and only then:
with one run per side it is the only knowledge of what a second run moves.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ValidationError

from harness.analysis.compare import compat
from harness.analysis.compare.metrics import METRICS, metric
from harness.analysis.compare.samples import (
    Run,
    measured,
    point_labels,
    point_runs,
    run_side,
    scale_of,
)
from harness.analysis.compare.stats import MIN_RUNS, Known
from harness.analysis.numbers import human

RECORD_FILE = "noise.json"  # beside the runs it measured: results/<scenario>/noise.json
FORMAT = "wanbench-noise/1"


class NoiseError(ValueError):
    """Runs that cannot make a noise record, or a record that cannot be used."""


class Spread(BaseModel):
    """The variance of one run's value at one point, for one metric, over the A/A runs."""

    point_id: str
    point: str
    metric: str
    scale: Literal["log", "linear", "points"]
    runs: int
    repetitions: int  # the most repetitions a run had at this point
    variance: float

    @property
    def sd_text(self) -> str:
        """The spread as a reader takes it: a relative sd (log scale), one in points (CPU), or
        one in the metric's unit (linear: counts that can be 0)."""
        sd = float(np.sqrt(self.variance))
        if self.scale == "log":
            return f"{np.expm1(sd) * 100:.2f} %"
        return f"{sd:.2f} pp" if self.scale == "points" else human(sd)


class NoiseRecord(BaseModel):
    format: Literal["wanbench-noise/1"] = FORMAT
    recorded_at: str
    scenario_name: str
    hostname: str | None
    cpu_model: str | None
    cpu_count: int | None
    run_ids: list[str]
    first_run_at: str | None
    last_run_at: str | None
    reference: dict  # the first run's manifest keys that compat reads
    spreads: list[Spread]

    def known(self, point_id: str, metric_name: str, scale: str) -> Known | None:
        for spread in self.spreads:
            if (spread.point_id, spread.metric, spread.scale) == (point_id, metric_name, scale):
                return Known(spread.variance, spread.runs - 1.0, spread.repetitions)
        return None

    def problems(self, manifest: dict) -> list[str]:
        """Why this record does not describe a run of `manifest` (empty: it does)."""
        out = []
        if manifest.get("scenario_name") != self.scenario_name:
            out.append(f"scenario {self.scenario_name!r}, not {manifest.get('scenario_name')!r}")
        if manifest.get("hostname") != self.hostname:
            out.append(f"machine {self.hostname!r}, not {manifest.get('hostname')!r}")
        out += compat.differences(self.reference, manifest).refused
        return out

    def describe(self) -> str:
        when = (self.first_run_at or "?")[:16].replace("T", " ")
        until = (self.last_run_at or "?")[:16].replace("T", " ")
        return (f"{len(self.run_ids)} A/A runs of {self.scenario_name} on {self.hostname} "
                f"({when} to {until} UTC), recorded {self.recorded_at[:10]}")


def record(runs: list[Run], now: datetime) -> NoiseRecord:
    """The noise record of A/A runs: at least MIN_RUNS runs of one experiment, one machine
    and one kernel; a point enters where at least MIN_RUNS of them have valid repetitions,
    and a record that no point entered is refused."""
    if len(runs) < MIN_RUNS:
        raise NoiseError(f"{len(runs)} run(s) given; a run-to-run spread needs at least "
                         f"{MIN_RUNS} runs of the same scenario and kernel")
    first = runs[0]
    for run in runs[1:]:
        different = run.manifest["scenario_name"] != first.manifest["scenario_name"]
        problems = ([f"scenario {run.manifest['scenario_name']!r}, not "
                     f"{first.manifest['scenario_name']!r}"] if different else [])
        problems += compat.differences(first.manifest, run.manifest).refused
        problems += compat.kernel_differences(first.manifest, run.manifest)
        if run.manifest.get("hostname") != first.manifest.get("hostname"):
            problems.append(f"machine {run.manifest.get('hostname')!r}, not "
                            f"{first.manifest.get('hostname')!r}")
        if problems:
            raise NoiseError(f"{run.path} is not an A/A run of {first.path}: "
                             f"{'; '.join(problems)}; give runs of one scenario, kernel and "
                             "machine")
    labels = point_labels(runs).set_index("point_id")["point"]
    spreads = []
    for name in METRICS:
        if not measured(runs, name):
            continue
        for pid, per_run in point_runs(runs, metric(name), allow_invalid=False).items():
            scale = scale_of(metric(name), per_run)
            side = run_side(per_run, scale)
            if side is None or side.n < MIN_RUNS:
                continue
            spreads.append(Spread(point_id=pid, point=str(labels.get(pid, pid)), metric=name,
                                  scale=scale, runs=side.n,
                                  repetitions=int(side.repetitions.max()),
                                  variance=side.spread))
    if not spreads:
        raise NoiseError(f"no point has valid repetitions in {MIN_RUNS} or more of the "
                         f"{len(runs)} runs: a record of no point would hold nothing for "
                         "compare; measure A/A runs whose points are valid (a quieter machine, "
                         "more repetitions) and record them")
    created = sorted(str(run.manifest.get("created_at") or "") for run in runs)
    cpu = first.manifest.get("cpu") or {}
    return NoiseRecord(
        recorded_at=now.isoformat(timespec="seconds"),
        scenario_name=str(first.manifest["scenario_name"]),
        hostname=first.manifest.get("hostname"), cpu_model=cpu.get("model"),
        cpu_count=cpu.get("count"), run_ids=[run.run_id for run in runs],
        first_run_at=created[0] or None, last_run_at=created[-1] or None,
        reference={key: first.manifest.get(key) for key in compat.MANIFEST_KEYS},
        spreads=spreads)


def write(noise: NoiseRecord, path: Path) -> None:
    path.write_text(noise.model_dump_json(indent=1) + "\n")


def read(path: Path) -> NoiseRecord:
    try:
        return NoiseRecord.model_validate(json.loads(path.read_text()))
    except (json.JSONDecodeError, ValidationError) as exc:
        first = str(exc).splitlines()[0]
        raise NoiseError(f"noise record {path}: not one `wanbench noise` wrote ({first}); "
                         "record it again with `wanbench noise RUN...`") from None


def beside(runs: list[Run]) -> Path | None:
    """The noise record in the folder holding one of `runs` (results/<scenario>/), if any."""
    for run in runs:
        if (run.path.parent / RECORD_FILE).is_file():
            return run.path.parent / RECORD_FILE
    return None


__all__ = ["FORMAT", "RECORD_FILE", "NoiseError", "NoiseRecord", "Spread", "beside", "read",
           "record", "write"]
