"""Tests of a curve's shape along a swept column: the ratio of its ends or of every level to
the lowest, a rise then a fall, a rise at every step, a bend, one series' peak over another's.
A ratio of two points is the median of their ratios within each round (Measured.round_ratios),
with the rounds' spread beside it."""

from __future__ import annotations

from typing import Any

import pandas as pd

from harness.reproduce.claims.base import (
    Test,
    combinations,
    coordinates,
    rounded,
    rounds_spread,
    sweep_ends,
)
from harness.reproduce.verdict import Measured, Outcome, Unmeasured


def ratio_across(metric: str, column: str, low: float | None = None, high: float | None = None,
                 each: tuple[str, ...] = (), every: bool = False, pooled: bool = False,
                 **where: object) -> Test:
    """metric at column's highest valid level / at its lowest, for every combination of
    `each` (and the fixed `where`); passes when every ratio is within [low, high].

    every: each level beyond the lowest against the lowest, not only the highest: a claim
    about the whole curve ("independent of", "flat") holds at every point of it. pooled: the
    ratio of the two points' medians over all rounds, not the median of within-round ratios
    (earlier forms of checks took it; the check history rebuilds them)."""

    def inside(value: Any) -> Any:
        """A ratio (or each round's) within [low, high]."""
        return (low is None or value >= low) & (high is None or value <= high)

    def ratios_at(m: Measured, combo: dict, level: object, first: object) -> pd.Series:
        if pooled:
            top, bottom = (m.median(metric, **combo, **{column: at}) for at in (level, first))
            return pd.Series([top / bottom])
        return m.round_ratios(metric, {**combo, column: level}, {**combo, column: first})

    def test(m: Measured) -> Outcome:
        parts, passed = [], True
        for combo in combinations(m, each, where):
            first, last = sweep_ends(m, column, **combo)
            levels = [level for level in m.levels(column, recorded=True, **combo)
                      if level != first] if every else [last]
            for level in levels:
                ratios = ratios_at(m, combo, level, first)
                ratio = float(ratios.median())
                ok = bool(inside(ratio))
                passed &= ok
                label = coordinates(combo)
                spread = "" if pooled else rounds_spread(ratios, inside(ratios))
                parts.append(f"{label + ': ' if label else ''}{metric} at {column}={level} / at "
                             f"{first} = {ratio:.3g}{spread}{'' if ok else ' ✗'}")
        return Outcome(passed, "; ".join(parts))

    return test


def rises_then_falls(metric: str, column: str, rise: float, floor: float, pooled: bool = False,
                     **where: object) -> Test:
    """A curve that "first increases rapidly and then starts decreasing slowly": its peak
    (the level whose within-round ratio to the lowest level is highest) lies inside the
    sweep, at ≥ rise × the lowest level; every level past the peak is below it, and the
    highest level keeps ≥ floor × the peak (slowly), each of these a ratio to the peak
    within rounds. pooled: the fall as a ratio of the two levels' ratios to the lowest (each
    a median over rounds), as an earlier form of a check took it."""

    def test(m: Measured) -> Outcome:
        levels = m.levels(column, recorded=True, **where)
        if len(levels) < 3:
            raise Unmeasured(f"{column}: {len(levels)} level(s) ({levels}): a rise and a fall "
                             "need three")
        first = levels[0]

        def within(level: object, base: object) -> pd.Series:
            return m.round_ratios(metric, {**where, column: level}, {**where, column: base})

        ratio = {level: float(within(level, first).median()) for level in levels[1:]}
        ratio[first] = 1.0
        peak = max(levels, key=lambda level: ratio[level])
        after = [level for level in levels if level > peak]
        to_peak = {level: (pd.Series([ratio[level] / ratio[peak]]) if pooled
                           else within(level, peak)) for level in after}
        rose = ratio[peak] >= rise
        fell = bool(after) and all(float(to_peak[level].median()) < 1 for level in after)
        last = to_peak[levels[-1]] if after else pd.Series([1.0])
        slowly = float(last.median()) >= floor
        curve = ", ".join(f"{level}: {ratio[level]:.3g}" for level in levels)
        return Outcome(rose and fell and slowly,
                       f"{metric} / at {column}={first}: {curve}; peak at {peak} "
                       f"({ratio[peak]:.3g}× ≥ {rise}{'' if rose else ' ✗'}), "
                       + (f"then falls to {float(last.median()):.3g}× the peak"
                          f"{'' if pooled else rounds_spread(last, last >= floor)} "
                          f"(≥ {floor}{'' if slowly else ' ✗'})" if fell else
                          "no fall after it ✗"))

    return test


def peak_ratio(column: str, numerator: object, denominator: object, low: float | None = None,
               high: float | None = None, above: float | None = None,
               each: tuple[str, ...] = (), pooled: bool = False, **where: object) -> Test:
    """One series' peak reply rate (the highest over offered rates: the paper's saturation
    throughput) / another's, within [low, high]; `above` is a strict bound, for claims that
    one is higher than the other: a tie does not pass it. The peaks are each round's (the
    highest of the rates the round measured validly) and the ratio the median of the rounds'
    ratios, as every ratio of two points is; pooled: the ratio of the highest medians over
    all rounds, as earlier forms took it (the check history rebuilds them)."""

    def inside(value: Any) -> Any:
        return ((low is None or value >= low) & (high is None or value <= high)
                & (above is None or value > above))

    def peaks(m: Measured, combo: dict, series: object) -> pd.Series:
        at = {**combo, column: series}
        rates = m.levels("offered_rate_rps", **at)
        if pooled:
            return pd.Series([max(m.median("reply_rate_rps", **at, offered_rate_rps=rate)
                                  for rate in rates)])
        return pd.concat([m.by_round("reply_rate_rps", **at, offered_rate_rps=rate)
                          for rate in rates], axis=1).max(axis=1)

    def test(m: Measured) -> Outcome:
        parts, passed = [], True
        for combo in combinations(m, each, where):
            top, bottom = peaks(m, combo, numerator), peaks(m, combo, denominator)
            ratios = (top / bottom).dropna()
            if ratios.empty:
                raise Unmeasured(f"{column}: no round has both {numerator}'s and "
                                 f"{denominator}'s peak where {combo or 'anywhere'}")
            ratio = float(ratios.median())
            ok = bool(inside(ratio))
            passed &= ok
            label = coordinates(combo)
            spread = "" if pooled else rounds_spread(ratios, inside(ratios))
            parts.append(f"{label + ': ' if label else ''}peak {numerator} "
                         f"{rounded(float(top.median()))} / {denominator} "
                         f"{rounded(float(bottom.median()))} = {ratio:.3g}{spread}"
                         f"{'' if ok else ' ✗'}")
        return Outcome(passed, "; ".join(parts))

    return test


def _steps(m: Measured, metric: str, column: str, combo: dict,
           from_level: object = None) -> list[tuple[object, object, pd.Series]]:
    """Each step of the curve (a level and the next, from `from_level` on) with metric's
    ratio across it within each round: every point of the curve, not its ends."""
    levels = [level for level in m.levels(column, recorded=True, **combo)
              if from_level is None or level >= from_level]
    if len(levels) < 2:
        raise Unmeasured(f"{column}: one level only ({levels}) where {combo or 'anywhere'}")
    return [(low, high, m.round_ratios(metric, {**combo, column: high}, {**combo, column: low}))
            for low, high in zip(levels, levels[1:], strict=False)]


def grows_at_every_step(metric: str, column: str, low: float, each: tuple[str, ...] = (),
                        from_level: object = None, **where: object) -> Test:
    """metric rises at every step of column (from from_level on; a tie is no rise), and from
    the lowest level to the highest by ≥ low×; per combination of `each`."""

    def test(m: Measured) -> Outcome:
        parts, passed = [], True
        for combo in combinations(m, each, where):
            steps = [(a, b, float(r.median())) for a, b, r in
                     _steps(m, metric, column, combo, from_level)]
            ends = sweep_ends(m, column, **combo)
            whole = m.round_ratios(metric, {**combo, column: ends[1]}, {**combo, column: ends[0]})
            total = float(whole.median())
            rising = all(r > 1 for _, _, r in steps)
            ok = rising and total >= low
            passed &= ok
            label = coordinates(combo)
            parts.append(f"{label + ': ' if label else ''}{metric} steps "
                         + ", ".join(f"{a}→{b} ×{r:.3g}{'' if r > 1 else ' ✗'}"
                                     for a, b, r in steps)
                         + f"; {ends[1]} / {ends[0]} = {total:.3g}"
                         + f"{rounds_spread(whole, whole >= low)}{'' if total >= low else ' ✗'}")
        return Outcome(passed, "; ".join(parts))

    return test


def flattens(metric: str, column: str, each: tuple[str, ...] = (), pooled: bool = False
             ) -> Test:
    """Each increase of metric along column is smaller than the one before (the curve bends
    over): within each round that measured the whole curve validly, each rise over the one
    before it, and the median of those ratios over rounds < 1; per combination of `each`.
    pooled: the rises between medians over all rounds, as an earlier form of a check took
    them."""

    def test(m: Measured) -> Outcome:
        parts, passed = [], True
        for combo in combinations(m, each, {}):
            levels = m.levels(column, recorded=True, **combo)
            if len(levels) < 3:
                raise Unmeasured(f"{column}: {len(levels)} levels, a bend needs 3 ({combo})")
            if pooled:
                curves = pd.DataFrame({level: [m.median(metric, **combo, **{column: level})]
                                       for level in levels})
            else:
                curves = pd.DataFrame({level: m.by_round(metric, **combo, **{column: level})
                                       for level in levels}).dropna()
                if curves.empty:
                    raise Unmeasured(f"{metric}: no round measured every level of {column} "
                                     f"validly ({coordinates(combo)})")
            rises = curves.diff(axis=1).iloc[:, 1:]
            bends = [rises.iloc[:, i + 1] / rises.iloc[:, i] for i in range(rises.shape[1] - 1)]
            ok = all(float(bend.median()) < 1 for bend in bends)
            passed &= ok
            values = curves.median()
            parts.append(f"{coordinates(combo)}: {metric} "
                         + " → ".join(f"{rounded(v)} at {level}" for level, v in values.items())
                         + f" (rises {', '.join(rounded(r) for r in rises.median())}; each over "
                         f"the one before {', '.join(f'{b.median():.3g}' for b in bends)}"
                         f"{'' if pooled else f' in {len(curves)} round(s)'})"
                         f"{'' if ok else ' ✗'}")
        return Outcome(passed, "; ".join(parts))

    return test


def every_level_within(metric: str, column: str, low: float, high: float) -> Test:
    """metric at every level of column / at its lowest level within [low, high], each ratio
    taken within rounds (a flat curve: every point of it)."""

    def test(m: Measured) -> Outcome:
        levels = m.levels(column, recorded=True)
        if len(levels) < 2:
            raise Unmeasured(f"{column}: one level only ({levels}): a flat curve needs two")
        parts, passed = [], True
        for level in levels[1:]:
            ratios = m.round_ratios(metric, {column: level}, {column: levels[0]})
            ratio = float(ratios.median())
            ok = low <= ratio <= high
            passed &= ok
            parts.append(f"{level} / {levels[0]}: {ratio:.3g}"
                         f"{rounds_spread(ratios, (ratios >= low) & (ratios <= high))}"
                         f"{'' if ok else ' ✗'}")
        return Outcome(passed, f"{metric} along {column}: " + "; ".join(parts))

    return test
