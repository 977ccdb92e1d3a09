"""Runs a scenario into a run directory (harness.results), one point × repetition at a time.

  scenario_run  the run as one call: run_scenario(RunRequest) -> RunResult (outcome), shown
                by the caller's RunDisplay (display)
  child         the same run in a child process: `python -m harness.runner`, ChildRun
  kernels       the scenario under each kernel (`host`, or a guest's), a child run each
  run           preflight, manifest, the order of its points, topologies kept up, the loop
  context       what every point of a run shares: the run, and where server and clients are
  launch        one point × repetition started, checked and measured: a Measurement
  record        a Measurement (or a failure) as the point's record, judged by clients.validity
"""
