"""`wanbench run SCENARIO --kernel K [--kernel K ...]`: the same scenario under each kernel,
`host` on the host itself and any other in a guest, each a run of its own in a child process
(harness.runner.child): in the guest it must be, and on the host it is one too, so that every
kernel's run starts alike."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.analysis.summary import FINISHED_STATUSES
from harness.guest import accel, machine
from harness.guest.kernels import HOST, guest_output, needed_modules
from harness.guest.machine import GuestError
from harness.runner.child import ChildFailed, ChildRun, child_argv, read_result
from harness.runner.outcome import RunRequest, RunResult
from harness.scenario import Guest, Scenario

RESULT_PREFIX = ".wanbench-result-"  # a guest's result, in the results root it may write


@dataclass
class KernelOutcome:
    """One kernel's run: its result, or why there is none."""

    kernel: str  # HOST or an image path
    result: RunResult | None = None
    error: str | None = None
    seconds: float = 0.0

    @property
    def run_dir(self) -> Path | None:
        return self.result.run_dir if self.result else None


def run_kernels(scenario: Scenario, kernels: list[str], request: RunRequest,
                on_event: Callable[[str], None]) -> list[KernelOutcome]:
    """Runs the request under each kernel in turn; a kernel that fails is reported and the
    others still run. Invalid points are expected (an emulated CPU's are all invalid): the
    request should allow them, and the comparison says what they are."""
    assert request.scenario is not None and request.out.is_absolute()
    request.out.mkdir(parents=True, exist_ok=True)
    guest = scenario.guest or Guest()
    modules = needed_modules(scenario, request.scenario.parent, request.backend)
    mode: accel.Accel | None = None
    outcomes = []
    for kernel in kernels:
        outcome, start = KernelOutcome(kernel), time.monotonic()
        try:
            if kernel == HOST:
                on_event("kernel host: the running kernel, on the host")
                outcome.result = ChildRun(request).wait()
            else:
                if mode is None:
                    mode = accel.probe(Path(kernel))
                    on_event(f"guests run under {mode.mode.upper()}: {mode.why}")
                on_event(f"kernel {kernel}: booting a guest ({guest.cpus} vCPU, "
                         f"{guest.memory_mb} MiB, {mode.mode.upper()})")
                outcome.result = _in_guest(Path(kernel), request, guest, mode, modules, on_event)
            if outcome.result.status not in FINISHED_STATUSES:
                outcome.error = (f"the run exited with status {outcome.result.status}; its "
                                 f"output above says why")
        except (GuestError, ChildFailed) as exc:
            outcome.error = str(exc)
        outcome.seconds = time.monotonic() - start
        on_event(f"kernel {kernel}: " + (f"FAILED: {outcome.error}" if outcome.error else
                                         f"run {outcome.run_dir} in {outcome.seconds:.0f} s"))
        outcomes.append(outcome)
    return outcomes


def _in_guest(image: Path, request: RunRequest, guest: Guest, mode: accel.Accel,
              modules: list[str], on_event: Callable[[str], None]) -> RunResult:
    """The run in a guest booted from image; its result is written where the guest may
    write (the results root), and read back here."""
    with tempfile.TemporaryDirectory(prefix=RESULT_PREFIX, dir=request.out) as scratch:
        result = Path(scratch) / "result.json"
        ran = machine.run(image, child_argv(request, result), guest, mode, [request.out],
                          modules)
        on_event(f"kernel {image}: guest output:\n{guest_output(ran.console)}")
        return read_result(result, ran.status)
