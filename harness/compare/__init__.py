"""`wanbench compare`: is a candidate kernel's run worse than the base run, and can we tell?

Modules, one job each:
  metrics  the metrics compare judges: direction, per-second series, histogram statistic
  samples  one run as compare needs it: repetition values, per-second series, floors
  stats    the statistics of one row: nested variance, Welch t, interval, power
  compat   what differs between two runs, and whether that is allowed
  engine   one candidate against the base over the grid: rows, BH, verdicts
  render   markdown, HTML, JSON and CSV reports
  cli      arguments, exit codes (0 no regression, 1 regression, 2 error, 3 inconclusive)

The method and its validation are in docs/compare.md.
"""

from harness.compare.cli import build_report, register
from harness.compare.engine import (
    IMPROVEMENT,
    INCONCLUSIVE,
    REGRESSION,
    UNCHANGED,
    Comparison,
    Incomparable,
    Options,
    compare,
)

__all__ = ["IMPROVEMENT", "INCONCLUSIVE", "REGRESSION", "UNCHANGED", "Comparison",
           "Incomparable", "Options", "build_report", "compare", "register"]
