"""Is a candidate kernel worse than the base kernel, and can we tell? (`wanbench compare`)

The run is the unit: a side is one or more runs of one kernel, and what a second run of the
same kernel moves is known from the sides' own runs or from a noise record of A/A runs.

Modules, one job each:
  metrics  the metrics compare judges: direction, relative change or percentage points
  stats    the statistics of one row: run-to-run variance, t test, interval, power, runs needed
  samples  the runs of a side as compare needs them: per point, repetitions entering the
           verdict, invalid ones and why, a row's scale, labels
  noise    the noise record: the run-to-run spread of A/A runs (`wanbench noise`)
  compat   what differs between two runs, and whether that is allowed
  engine   one candidate side against the base side over the grid: rows, BH, verdicts
  report   the base side against every candidate side: loading, refusals, one report
  render   markdown, HTML, JSON and CSV reports

Its command lines are harness/commands/compare.py (exit codes 0 no regression, 1 regression,
2 error, 3 inconclusive) and harness/commands/noise.py. The method and its validation are in
docs/compare.md.
"""
