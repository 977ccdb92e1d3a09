"""Shared test fixtures: built binaries, free ports, root and capability checks."""

from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from clients.validity import Code, Kind
from harness.results.verdict import verdicts

# pytest caches its assertion-rewritten test modules only where bytecode may be written: with
# PYTHONDONTWRITEBYTECODE set (this machine's environment sets it) every pytest process, and
# each xdist worker, rewrote all ~130 test modules again, about 4 s a process.
sys.dont_write_bytecode = False

REPO = Path(__file__).resolve().parent.parent


# A script that holds its CPU 5 ms in every 50 (run at real-time priority: chrt -f), as kdamond,
# a kernel thread the kernel does not preempt, held the demo's generator's CPU 1-4 ms at a time
STALLER = """
import time
while True:
    until = time.monotonic() + 0.005
    while time.monotonic() < until:
        pass
    time.sleep(0.045)
"""


# What a busy machine (the rest of the suite, the VM's neighbours) may do to a point, and the
# point says so: interference, or late sends that no other task explains (a vCPU slow to wake)
BUSY_MACHINE_CODES = frozenset({Code.LATE_SENDS} | {code for code in Code
                                                    if code.kind is Kind.INTERFERENCE})
# What the same stall does to whoever reads the window's edges, who shares the machine: said
# beside one of the codes above, it is that stall, not the harness
STALLED_WITH_THEM = frozenset({Code.WINDOW_DISAGREES})


def busy_machine_explains(codes: tuple[str, ...]) -> bool:
    """Whether a busy machine explains every reason an invalid point gives."""
    said = set(codes)
    return bool(said & BUSY_MACHINE_CODES) and said <= BUSY_MACHINE_CODES | STALLED_WITH_THEM


def not_a_busy_machine(points: pd.DataFrame) -> list[tuple[str | None, tuple[str, ...]]]:
    """The invalid points' reasons and codes that a busy machine does not explain: in a test of
    what the harness does, none is expected."""
    return [(verdict.reason, verdict.codes) for verdict in verdicts(points)
            if not verdict.valid and not busy_machine_explains(verdict.codes)]


def build(target: str) -> Path:
    """Build one make target (e.g. build/bin/wb-server) and return its path.

    One make at a time across the suite's processes: two xdist workers (or the guest lane)
    that both find a binary missing would both link it, and one would exec the file while the
    other's linker still held it open for writing (ETXTBSY)."""
    (REPO / "build").mkdir(exist_ok=True)
    with (REPO / "build" / ".make.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run(["make", "-s", "-C", str(REPO), target], check=True)
    return REPO / target


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(autouse=True, scope="session")
def _private_analysis_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """wanbench caches under the user's ~/.cache: the tests keep theirs apart, one for the
    session, or the one `make test` gives all its sessions (WANBENCH_TEST_CACHE), where the
    alone part finds the KVM probe's answer that the guests' part found (5 s of a CPU)."""
    os.environ["WANBENCH_CACHE"] = (os.environ.get("WANBENCH_TEST_CACHE")
                                    or str(tmp_path_factory.mktemp("wanbench-cache")))


@pytest.fixture
def port() -> int:
    return free_port()


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, rlimits)")


# Files whose tests start no load, measure no time and bring no topology up (at most one
# wb-server answering a few requests): `make test` runs them two at a time (the `beside`
# mark), and the rest one at a time, as real loads, namespaces and `timing` tests need the
# machine to themselves. A file not named here runs alone.
BESIDE = (
    "tests/analysis/",
    "tests/reproduce/test_beyond.py",
    "tests/reproduce/test_capabilities.py",
    "tests/reproduce/test_claims.py",
    "tests/reproduce/test_history.py",
    "tests/reproduce/test_kernel_claims.py",
    "tests/reproduce/test_reproduce_command.py",
    "tests/reproduce/test_status_is_generated.py",
    "tests/runner/test_damaged_runs.py",
    "tests/runner/test_hostile_input.py",
    "tests/runner/test_manifest.py",
    "tests/runner/test_scenario.py",
    "tests/runner/test_scenario_errors.py",
    "tests/runner/test_scenario_limits.py",
    "tests/runner/test_window.py",
    "tests/clients/test_validity.py",
    "tests/clients/test_bench_clients_page.py",
    "tests/ktrace/test_bench_report.py",
    "tests/ktrace/test_bench_hooks_page.py",
    "tests/ktrace/test_columns.py",
    "tests/ktrace/test_compare.py",
    "tests/ktrace/test_figures.py",
    "tests/ktrace/test_functions.py",
    "tests/guest/test_accel.py",
    "tests/guest/test_comparison.py",
    "tests/topology/test_address_policy.py",
    "tests/topology/test_model.py",
    "tests/topology/test_calibrate.py",
    "tests/topology/test_commands.py",
    "tests/topology/test_bench_wan_report.py",
    "tests/runner/test_summary.py",
    "tests/runner/test_external_files.py",
    "tests/runner/test_lateness.py",
    "tests/runner/test_record.py",
    "tests/runner/test_results.py",
    "tests/runner/test_callers.py",
    "tests/runner/test_noise_sources.py",
    "tests/runner/test_quiet.py",
    "tests/clients/test_limits.py",
    "tests/clients/test_target_rule.py",
    "tests/cluster/test_placement.py",
    "tests/clients/test_overload_rules.py",
    "tests/ktrace/test_describe.py",
    "tests/ktrace/test_doctor.py",
    # wb-server's protocol and limits, one server per test: what they assert (replies,
    # refusals, an idle server's own CPU) no neighbour's load changes. Not test_cli.py: its
    # counters of a two-worker server are read while a worker may not yet have counted the
    # reply its client already has, which a busy CPU makes likely
    "tests/servers/test_http.py",
    "tests/servers/test_limits.py",
    "tests/servers/test_bench_report.py",
    "tests/servers/test_fuzz.py",
    "tests/test_busy_machine.py",
    "tests/test_layers.py",
    "tests/test_yamlfile.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(item.fspath).relative_to(REPO).as_posix()
        if path.startswith(BESIDE) and item.get_closest_marker("timing") is None:
            item.add_marker(pytest.mark.beside)
