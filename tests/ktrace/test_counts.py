"""Known workloads give known counts: every dispatch call of the measured tree is counted once,
select's in-kernel cost grows with the descriptors it scans and epoll_wait's does not, and a
busy process outside the tree adds nothing."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ktrace.conftest import WORKLOAD, Loader, Workload, median_bucket, traced

CALLS = 300


@pytest.mark.parametrize("kind,family", [("select", "select"), ("epoll", "epoll_wait")])
def test_n_dispatch_calls_are_traced_as_n(ktrace_bin: Path, kind: str, family: str):
    document = traced(ktrace_bin, kind, 10, CALLS)
    server = document["roles"]["server"]
    assert server[family]["calls"] == CALLS
    assert sum(server[family]["hist_log2_ns"]) == CALLS
    assert server[family]["returned"] == 0  # nothing was ready
    others = {"select", "epoll_wait"} - {family}
    assert all(server[other]["calls"] == 0 for other in others)
    assert document["window_ns"] > 0 and document["events"]["traced"] >= CALLS


def test_select_costs_more_per_call_over_1000_descriptors_and_epoll_wait_does_not(
        ktrace_bin: Path):
    median = {(kind, fds): median_bucket(traced(ktrace_bin, kind, fds, CALLS)["roles"]["server"]
                                         [family])
              for kind, family in (("select", "select"), ("epoll", "epoll_wait"))
              for fds in (10, 1000)}
    # select scans every descriptor: 100 times as many cost at least 8 times as much (the
    # log2 buckets' medians 3 apart; here 1 us against 30 us)
    assert median["select", 1000] >= median["select", 10] + 3, median
    # epoll_wait looks at its ready list only: within one bucket of each other
    assert abs(median["epoll", 1000] - median["epoll", 10]) <= 1, median


def _window_beside(binary: Path, outsider: int, as_generator: bool) -> dict:
    """CALLS select calls of the measured workload in a window of 0.2 s or more, while the
    outsider spins; named as the generator or not at all."""
    workload = Workload("select", 10, CALLS)
    loader = Loader(binary, "--pid", str(workload.pid),
                    *(("--generator-pid", str(outsider)) if as_generator else ()))
    try:
        loader.start()
        workload.run()
        time.sleep(0.2)  # the outsider's calls go on
        return loader.stop()
    finally:
        loader.close()
        workload.close()


def test_a_busy_process_outside_the_tree_adds_nothing(ktrace_bin: Path):
    outsider = subprocess.Popen([sys.executable, str(WORKLOAD), "spin", "10", "0"],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert outsider.stdout is not None and outsider.stdout.readline()  # spinning
        alone = _window_beside(ktrace_bin, outsider.pid, as_generator=False)
        both = _window_beside(ktrace_bin, outsider.pid, as_generator=True)
    finally:
        outsider.kill()
        outsider.wait()
    assert alone["roles"]["server"]["select"]["calls"] == CALLS
    assert "generator" not in alone["roles"]
    # the same outsider, named as the generator, is counted there and only there
    assert both["roles"]["server"]["select"]["calls"] == CALLS
    assert both["roles"]["generator"]["select"]["calls"] > CALLS


def test_a_child_forked_after_the_loader_started_is_followed(ktrace_bin: Path):
    document = traced(ktrace_bin, "select", 10, CALLS, fork=True)
    assert document["roles"]["server"]["select"]["calls"] == CALLS
    assert document["events"]["followed"] >= 1


def test_calls_outside_the_window_are_not_counted(ktrace_bin: Path, workloads: list):
    workload = Workload("select", 10, CALLS)
    workloads.append(workload)
    loader = Loader(ktrace_bin, "--pid", str(workload.pid))
    try:
        workload.run()  # loaded and following, not yet counting
        loader.start()
        document = loader.stop()
    finally:
        loader.close()
    assert document["roles"]["server"]["select"]["calls"] == 0


def test_hooks_attach_only_the_groups_given(ktrace_bin: Path):
    """--hooks (what each group of tracepoints costs: bench-ktrace-hooks) leaves the other
    groups unattached: the system calls are counted with `calls` and not without it."""
    with_calls = traced(ktrace_bin, "epoll", 10, CALLS, extra=("--hooks", "calls,softirq"))
    assert with_calls["roles"]["server"]["epoll_wait"]["calls"] == CALLS
    without = traced(ktrace_bin, "epoll", 10, CALLS, extra=("--hooks", "switch,packets"))
    assert without["roles"]["server"]["epoll_wait"]["calls"] == 0


def test_an_unknown_hook_group_is_refused_by_name(ktrace_bin: Path):
    refused = subprocess.run([str(ktrace_bin), "--hooks", "calls,syscalls", "--pid", "1"],
                             capture_output=True, text=True, timeout=10)
    assert refused.returncode == 2
    assert "syscalls is not a group" in refused.stderr
