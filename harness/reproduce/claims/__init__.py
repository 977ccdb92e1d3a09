"""Each reproduction target's shape checks, written from its paper (the claim's source): one
module per paper, built from the tests of the modules beside them.

A claim compares medians over valid repetitions (harness.reproduce.verdict.Measured) with
a bound for the paper's own quantity: a ratio along a sweep, which 1998-2004 hardware and
today's can share, or a share of the CPU at the paper's load, two-sided about the paper's
number with the tolerance's source stated. Where the paper's magnitude is its hardware's,
the bound keeps the shape ("select loses 44 %" becomes "select loses at least 25 %"); a
paper's own bound ("less than 1%") is checked as it is. A ratio of two points of a
sweep is the median of their ratios within each round (Measured.round_ratios), and the
rounds' spread is printed beside it, with how many rounds fell beyond the bound when some
did. Each bound's reason is in its claim text, where `wanbench reproduce --check` prints it.
"""

from __future__ import annotations

from harness.reproduce.claims import (
    banga_mogul_1998,
    banga_mogul_druschel_1999,
    chandra_mosberger_2001,
    cycles_per_packet,
)
from harness.reproduce.verdict import Claim

CLAIMS: dict[str, tuple[Claim, ...]] = {
    **banga_mogul_1998.CLAIMS,
    **banga_mogul_druschel_1999.CLAIMS,
    **chandra_mosberger_2001.CLAIMS,
    **cycles_per_packet.CLAIMS,
}
