"""The kernels a scenario runs under (`wanbench run --kernel`): `host`, or images that a guest
boots, checked before any run; the modules a guest's kernel must load for the run; the run's
own output in a guest's console. harness.runner.kernels runs the scenario under each."""

from __future__ import annotations

from pathlib import Path

from harness.guest import inside, machine
from harness.guest.machine import GuestError
from harness.scenario import Scenario, points
from harness.topology import load_topology
from harness.topology.backends import BACKENDS

HOST = "host"


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
        # a module built in counts: modprobe succeeds for it; auto is probed in the guest
        chosen = BACKENDS.get(backend or ref.backend)
        modules.update(chosen.modules if chosen else ())
    return sorted(modules)


def guest_output(console: str) -> str:
    """The run's own output in the guest's console, without the kernel's boot messages."""
    return console.split(inside.STARTED, 1)[-1].split(inside.EXITED, 1)[0].strip()
