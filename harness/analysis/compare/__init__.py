"""Is a candidate kernel's run worse than the base run, and can we tell? (`wanbench compare`)

Modules, one job each:
  metrics  the metrics compare judges: direction, per-second series, histogram statistic
  samples  one run as compare needs it: repetition values, per-second series, floors
  stats    the statistics of one row: nested variance, Welch t, interval, power
  compat   what differs between two runs, and whether that is allowed
  engine   one candidate against the base over the grid: rows, BH, verdicts
  report   the base against every candidate: loading, refusals, one report
  render   markdown, HTML, JSON and CSV reports

Its command line (arguments, exit codes 0 no regression, 1 regression, 2 error,
3 inconclusive) is harness/commands/compare.py. The method and its validation are in
docs/compare.md.
"""
