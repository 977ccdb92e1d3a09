"""What every claim's test is built from: the test's type, how its numbers are written
(a point's coordinates, a rounded number, the rounds' spread), the sweep a claim is about
(its ends, the combinations of the columns it holds for each of), and the tests made of
other tests (on one series, on a view of the records, at the highest level a run swept, all
of several)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from harness.reproduce.verdict import Measured, Outcome, Unmeasured

Test = Callable[[Measured], Outcome]


def coordinates(combo: dict) -> str:
    """A point's coordinates as the numbers name them: "dispatch=select, cold_conns=2000"."""
    return ", ".join(f"{k}={v}" for k, v in combo.items())


def rounded(value: float) -> str:
    """value to 3 significant digits, or whole when ≥ 100: "0.244", "2,105"."""
    return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"


def sweep_ends(m: Measured, column: str, **where: object) -> tuple[object, object]:
    """The sweep's lowest and highest level of column: the claim is about those, so an
    invalid end fails it (Measured.median says why) rather than moving inwards."""
    levels = m.levels(column, recorded=True, **where)
    if len(levels) < 2:
        raise Unmeasured(f"{column}: one level only ({levels}) where {where or 'anywhere'}")
    return levels[0], levels[-1]


def rounds_spread(ratios: pd.Series, within: pd.Series) -> str:
    """The rounds' ratios behind a median: their range, and how many were beyond the bound
    when some were (a verdict the rounds do not all share)."""
    if len(ratios) < 2:
        return " (1 round)"
    beyond = int((~within).sum())
    return (f" (rounds {ratios.min():.3g}-{ratios.max():.3g}"
            f"{f', {beyond} of {len(ratios)} beyond the bound' if beyond else ''})")


def combinations(m: Measured, each: tuple[str, ...], where: dict) -> list[dict]:
    """where with each combination of `each`'s values the run swept: a claim made "each
    reply size" is judged once per combination."""
    if not each:
        return [dict(where)]
    frame = m.rows(valid=False, **where)  # every combination swept: an all-invalid one fails
    missing = [c for c in each if c not in frame.columns]
    if missing or frame.empty:
        raise Unmeasured(f"no points with {', '.join(each)} where {where or 'anywhere'}")
    keys = frame[list(each)].drop_duplicates().sort_values(list(each))
    return [{**where, **dict(zip(each, row, strict=True))} for row in keys.itertuples(index=False)]


def among(test: Test, **where: object) -> Test:
    """test on one series of several (e.g. the unmodified kernel's curves only)."""
    return lambda m: test(m.only(**where))


def on_view(view: Callable[[Measured], Measured], test: Test) -> Test:
    """test on a view of the records (e.g. by_mechanism's series of two columns)."""
    return lambda m: test(view(m))


def at_highest(column: str, test_at: Callable[[object], Test]) -> Test:
    """test_at(level) at column's highest recorded level, which only the run tells (e.g. the
    most connections a sweep reached)."""
    return lambda m: test_at(max(m.levels(column, True)))(m)


def all_of(*tests: Test) -> Test:
    """Several tests as one: it passes when each does, and shows each one's numbers."""

    def test(m: Measured) -> Outcome:
        outcomes = [t(m) for t in tests]
        return Outcome(all(o.passed for o in outcomes), " | ".join(o.numbers for o in outcomes))

    return test


def unreachable(m: Measured) -> Outcome:
    """The test of a claim no machine here can measure: its `needs` is never met, so
    evaluate_claim never runs it."""
    return Outcome(False, "unreachable")
