"""A run that could not start or go on: its exception and exit status. Apart from the rest of
the runner's boundary (outcome) so that a command can refuse bad input before it imports the
runner (pandas and pyarrow: half a second)."""

from __future__ import annotations

# A run that could not start or go on; a finished run's statuses are the summary's
# (harness.analysis.summary.gate), a stop signal's 128 + its number (harness.interrupts).
EXIT_REFUSED = 2  # bad input or an error: nothing measured, or a topology refused


class RunRefused(RuntimeError):
    """The run could not start or go on (scenario, missing tool, run directory, topology);
    the message is one line naming the problem and the fix."""
