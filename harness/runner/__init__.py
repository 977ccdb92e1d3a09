"""Runs a scenario into a run directory (harness.results), one point × repetition at a time.

  run      preflight, manifest, run order, topologies kept up, the loop over points
  context  what every point of a run shares: the run, and where server and clients are
  launch   one point × repetition started, checked and measured: a Measurement
  record   a Measurement (or a failure) as the point's record, judged by clients.validity
"""
