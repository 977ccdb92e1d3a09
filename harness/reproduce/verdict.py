"""Verdicts: a claim's outcome on measured data, and how a target's claims make its status."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

import pandas as pd

from harness.analysis import derive


class Status(StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"
    NOT_RUN = "NOT RUN"
    NOT_POSSIBLE = "NOT POSSIBLE HERE"


class Unmeasured(Exception):
    """The run lacks what a claim compares (no valid point there, a column absent): the
    target ran but did not measure it, which fails the reproduction."""


@dataclass(frozen=True)
class Outcome:
    passed: bool
    numbers: str  # what was compared, with the values, e.g. "select 2000/0 cold: 0.41 ≤ 0.6"


class Measured:
    """One run of a target's scenario: every point record (valid or not, derived columns
    added) and its profiles. Claims ask it for medians over valid repetitions, and for ratios
    of two points within each round."""

    def __init__(self, points: pd.DataFrame, profiles: pd.DataFrame | None = None) -> None:
        self.all = derive.add_derived(points)
        self.valid = derive.valid_points(self.all)
        self.profiles = profiles if profiles is not None else pd.DataFrame()

    def with_column(self, name: str, values: Callable[[pd.DataFrame], pd.Series]) -> Measured:
        """The same records with one more column, e.g. a series label made of two."""
        out = copy.copy(self)
        out.all = self.all.assign(**{name: values(self.all)})
        out.valid = out.all.loc[self.valid.index]
        return out

    def only(self, **where: object) -> Measured:
        """The records whose columns have the given values (one series of several)."""
        out = copy.copy(self)
        out.all = self._where(self.all, where)
        out.valid = self.valid.loc[self.valid.index.isin(out.all.index)]
        return out

    def rows(self, valid: bool = True, **where: object) -> pd.DataFrame:
        """The valid records (or all of them) whose columns have the given values."""
        return self._where(self.valid if valid else self.all, where)

    def _where(self, frame: pd.DataFrame, where: dict[str, object]) -> pd.DataFrame:
        for column, value in where.items():
            if column not in frame.columns:
                raise Unmeasured(f"no column {column} in the run")
            frame = frame[frame[column] == value]
        return frame

    def values(self, metric: str, **where: object) -> pd.Series:
        """The valid repetitions' values of metric at one point (Unmeasured when none)."""
        chosen = self._where(self.valid, where)
        values = pd.to_numeric(chosen.get(metric, pd.Series(dtype=float)), errors="coerce")
        values = values.dropna()
        if values.empty:
            raise Unmeasured(self._why_missing(metric, where))
        return values

    def median(self, metric: str, **where: object) -> float:
        return float(self.values(metric, **where).median())

    def by_round(self, metric: str, **where: object) -> pd.Series:
        """The valid value of metric at one point in each round (repetition) that measured it
        (Unmeasured when none did)."""
        values = self.values(metric, **where)
        rounds = self._where(self.valid, where).loc[values.index, "repetition"]
        return values.groupby(rounds).median()

    def round_ratios(self, metric: str, numerator: dict[str, object],
                     denominator: dict[str, object]) -> pd.Series:
        """metric at numerator / at denominator within each round that measured both validly.

        A run's repetitions are rounds over its sweep (scenario.order), so the points of one
        curve ran close together in each round, while a slow spell can cover a whole curve of
        one round (a neighbour's load, the host's own drift). Side by side in one round, what
        drifts between rounds cancels."""
        top, bottom = self.by_round(metric, **numerator), self.by_round(metric, **denominator)
        ratios = (top / bottom).dropna()
        if ratios.empty:
            raise Unmeasured(f"{metric}: no round measured both {numerator} and {denominator} "
                             f"validly (rounds {sorted(top.index)} and {sorted(bottom.index)})")
        return ratios

    def levels(self, column: str, recorded: bool = False, **where: object) -> list:
        """The values column took (sorted) among valid points, or among all recorded ones
        (the sweep's own levels, valid or not), e.g. the cold counts swept."""
        chosen = self._where(self.all if recorded else self.valid, where)
        if column not in chosen.columns or chosen.empty:
            raise Unmeasured(self._why_missing(column, where))
        return sorted(chosen[column].dropna().unique())

    def _why_missing(self, metric: str, where: dict[str, object]) -> str:
        at = ", ".join(f"{k}={v}" for k, v in where.items()) or "any point"
        records = self._where(self.all, where)
        if records.empty:
            return f"{metric} at {at}: no such point in the run"
        invalid = records[~records.index.isin(self.valid.index)]
        if len(invalid) == len(records):
            reasons = sorted({str(r).split(";")[0] for r in invalid.get("invalid_reason", [])})
            return f"{metric} at {at}: all {len(records)} record(s) invalid ({'; '.join(reasons)})"
        return f"{metric} at {at}: not measured"


@dataclass(frozen=True)
class Claim:
    """One shape the paper reports, as a test on a run. `needs` names a capability the test
    cannot do without (a key of harness.reproduce.capabilities.PROBES). `quote` is the
    paper's own sentence or number that the claim tests, verbatim; `bound` says where the
    threshold comes from: the paper's number with a stated tolerance, or, where the paper
    gives only words, the bound written down before the run that tests it (the check history,
    harness/reproduce/history.yaml, says when)."""

    text: str
    source: str
    test: Callable[[Measured], Outcome]
    needs: str | None = None
    quote: str = ""
    bound: str = ""


@dataclass
class ClaimResult:
    claim: Claim
    status: Status
    detail: str


@dataclass
class TargetResult:
    target: str
    title: str
    scenario: str
    status: Status
    run: str | None = None
    claims: list[ClaimResult] = field(default_factory=list)
    note: str = ""

    @property
    def summary(self) -> str:
        """One line: what decided the status."""
        if self.note:
            return self.note
        deciding = [c for c in self.claims if c.status == self.status] or self.claims
        return "; ".join(f"{c.claim.text}: {c.detail}" for c in deciding)


def evaluate_claim(claim: Claim, measured: Measured, missing: str | None) -> ClaimResult:
    """missing: why the claim's needed capability is absent from this run, or None."""
    if missing:
        return ClaimResult(claim, Status.NOT_POSSIBLE, missing)
    try:
        outcome = claim.test(measured)
    except Unmeasured as why:
        return ClaimResult(claim, Status.FAIL, f"not measured: {why}")
    return ClaimResult(claim, Status.PASS if outcome.passed else Status.FAIL, outcome.numbers)


def combine(results: list[ClaimResult]) -> Status:
    """Any failed claim fails the target; it passes when every claim this machine can test
    passed; NOT POSSIBLE HERE when it can test none."""
    statuses = {r.status for r in results}
    if Status.FAIL in statuses:
        return Status.FAIL
    if Status.PASS in statuses:
        return Status.PASS
    return Status.NOT_POSSIBLE
