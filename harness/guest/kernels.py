"""`wanbench run SCENARIO --kernel K [--kernel K ...]`: the same scenario under each kernel,
`host` on the host itself and any other in a guest, each stored as a normal run."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness import interrupts
from harness.analysis.summary import FINISHED_STATUSES
from harness.guest import accel, inside, machine
from harness.guest.machine import GuestError
from harness.scenario import Guest, Scenario, points
from harness.topology import load_topology

HOST = "host"
# what each topology backend needs of a guest kernel besides namespaces (a module built in
# counts: modprobe succeeds for it)
BACKEND_MODULES = {"netem": ["sch_netem"], "userspace": ["tun"]}
# how long a stopped host run may take to tear its topology down and keep its points
HOST_RUN_STOP_S = 120.0


@dataclass
class KernelOutcome:
    """One kernel's run: its directory, or why there is none."""

    kernel: str  # HOST or an image path
    run_dir: Path | None = None
    error: str | None = None
    seconds: float = 0.0


def check_kernels(kernels: list[str]) -> None:
    """Refuses before any run: an image that is not there would fail after the others ran."""
    for kernel in kernels:
        if kernel != HOST:
            machine.check_image(Path(kernel))
    repeated = {k for k in kernels if kernels.count(k) > 1}
    if repeated:
        raise GuestError(f"--kernel {', '.join(sorted(repeated))} given more than once; name "
                         "each kernel once (repetitions: the scenario's `repetitions`)")


def needed_modules(scenario: Scenario, scenario_dir: Path, backend: str | None) -> list[str]:
    """The kernel modules the scenario's topologies need under the chosen backend."""
    modules: set[str] = set()
    for point in {p.topology_key: p for p in points(scenario)}.values():
        ref = point.config.topology
        if load_topology(ref.path(scenario_dir), dict(ref.set) or None).loopback:
            continue
        modules.add("veth")
        modules.update(BACKEND_MODULES.get(backend or ref.backend, []))
    return sorted(modules)


def _runs(out: Path, scenario: Scenario) -> set[Path]:
    return {p for p in (out / scenario.name).glob("*") if (p / "manifest.json").is_file()}


def _guest_output(console: str) -> str:
    """The run's own output in the guest's console, without the kernel's boot messages."""
    return console.split(inside.STARTED, 1)[-1].split(inside.EXITED, 1)[0].strip()


def _run_on_host(argv: list[str]) -> int:
    """`wanbench run` on the host; stopped, it gets the signal and tears down its own topology
    and processes (subprocess.run would SIGKILL it and leave them to `topo clean`)."""
    child = subprocess.Popen(argv)
    try:
        return child.wait()
    except interrupts.Interrupted as stop:
        if child.poll() is None:
            # a terminal's ^C reached it already, and a run ignores a second stop signal
            child.send_signal(stop.signum)
            try:
                child.wait(timeout=HOST_RUN_STOP_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        raise


def run_kernels(scenario_file: Path, scenario: Scenario, kernels: list[str], out: Path,
                sets: list[str], backend: str | None,
                on_event: Callable[[str], None]) -> list[KernelOutcome]:
    """Runs the scenario under each kernel in turn, through `wanbench run` with the same
    --set and --backend; a kernel that fails is reported and the others still run."""
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    guest = scenario.guest or Guest()
    modules = needed_modules(scenario, scenario_file.resolve().parent, backend)
    # invalid points are expected (an emulated CPU's are all invalid): the comparison says so
    argv = [sys.executable, "-m", "harness.cli", "run", str(scenario_file.resolve()),
            "--out", str(out), "--allow-invalid", *(f"--set={s}" for s in sets),
            *(["--backend", backend] if backend else [])]
    mode: accel.Accel | None = None
    outcomes = []
    for kernel in kernels:
        outcome = KernelOutcome(kernel)
        before, start = _runs(out, scenario), time.monotonic()
        try:
            if kernel == HOST:
                on_event("kernel host: the running kernel, on the host")
                status = _run_on_host(argv)
            else:
                if mode is None:
                    mode = accel.probe(Path(kernel))
                    on_event(f"guests run under {mode.mode.upper()}: {mode.why}")
                on_event(f"kernel {kernel}: booting a guest ({guest.cpus} vCPU, "
                         f"{guest.memory_mb} MiB, {mode.mode.upper()})")
                result = machine.run(Path(kernel), argv, guest, mode, [out], modules)
                on_event(f"kernel {kernel}: guest output:\n{_guest_output(result.console)}")
                status = result.status
            made = sorted(_runs(out, scenario) - before)
            if status not in FINISHED_STATUSES or len(made) != 1:
                outcome.error = (f"`wanbench run` exited with status {status} and made "
                                 f"{len(made)} run(s); its output above says why")
            outcome.run_dir = made[-1] if made else None
        except GuestError as exc:
            outcome.error = str(exc)
        outcome.seconds = time.monotonic() - start
        on_event(f"kernel {kernel}: " + (f"FAILED: {outcome.error}" if outcome.error else
                                         f"run {outcome.run_dir} in {outcome.seconds:.0f} s"))
        outcomes.append(outcome)
    return outcomes

