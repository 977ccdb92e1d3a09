"""The measured tree's on-CPU time, which wb-ktrace counts at its switch edges on the calls'
own clock: a call's in-kernel share of it is at most 100 % by construction, and so is the sum
of every call's. The tree's schedstat run time (the kernel's other account) is a cross-check
here, not the measure: for a tree that stays on its CPU both count the same slices and agree
within a few %. A tree that sleeps reads more in schedstat: a wake-up that preempts the idle
task skips the run queue's next clock update (wakeup_preempt's rq_clock_skip_update), so the
woken task's run is dated from its wake-up in the interrupt, the idle exit before its switch
in included."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ktrace.conftest import Loader, Workload, exchange

# the two accounts of the same slices: schedstat reads the run queue's clock at the switches,
# the tracer bpf_ktime_get_ns a few instructions away; a few % covers the edges' slices
AGREE = 0.05


def _ran_ns(pid: int) -> int:
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


@pytest.mark.parametrize("kind,fds,calls", [
    ("select", 1000, 2000),  # on the CPU throughout: mostly in select
    ("select-wait", 100, 300),  # asleep in each select: its time off the CPU is no one's
    ("epoll", 1000, 10000),
    ("tcp", 0, 2000),  # loopback: the receiver's softirq runs inside the sender's write
])
def test_the_trees_on_cpu_time_agrees_with_schedstat_and_holds_its_calls(
        ktrace_bin: Path, workloads: list, kind: str, fds: int, calls: int):
    workload = Workload(kind, fds, calls)
    workloads.append(workload)
    loader = Loader(ktrace_bin, "--pid", str(workload.pid))
    try:
        before = _ran_ns(workload.pid)
        loader.start()
        workload.run()
        document = loader.stop()
        ran_ns = _ran_ns(workload.pid) - before
    finally:
        loader.close()
    on_cpu_ns = document["on_cpu_ns"]["server"]
    sleeps = kind == "select-wait"
    assert on_cpu_ns >= (1 - AGREE) * ran_ns or sleeps, (on_cpu_ns, ran_ns)
    assert on_cpu_ns <= (1 + AGREE) * ran_ns, (on_cpu_ns, ran_ns)
    families = document["roles"]["server"].values()
    assert all(f["kernel_ns"] <= on_cpu_ns for f in families), document
    assert sum(f["kernel_ns"] for f in families) <= on_cpu_ns, document
    if sleeps:
        select = document["roles"]["server"]["select"]
        # asleep about 1 ms in each call: that time is neither the call's nor on the CPU
        assert select["off_cpu_ns"] > 0.5e6 * calls and on_cpu_ns < select["off_cpu_ns"]


def test_the_window_is_given_by_its_monotonic_edges(ktrace_bin: Path, workloads: list):
    import time

    workload = Workload("select", 10, 100)
    workloads.append(workload)
    loader = Loader(ktrace_bin, "--pid", str(workload.pid))
    try:
        before = time.monotonic_ns()
        loader.start()
        inside = time.monotonic_ns()
        workload.run()
        document = loader.stop()
        after = time.monotonic_ns()
    finally:
        loader.close()
    window = document["window"]
    assert before <= window["start_ns"] <= inside <= window["end_ns"] <= after, (before, window)
    assert document["window_ns"] == window["end_ns"] - window["start_ns"]


def test_a_window_given_ahead_counts_from_and_to_its_instants(ktrace_bin: Path, workloads: list):
    """`start NS` / `stop NS`, sent ahead of the runner's edges, switch counting at them: the
    edges are the instants given (or just after, never before), not when a line was read, and
    the calls made before them are not counted."""
    import time

    workload = Workload("select", 10, 100)
    workloads.append(workload)
    loader = Loader(ktrace_bin, "--pid", str(workload.pid))
    try:
        start = time.monotonic_ns() + 300_000_000
        workload.run()  # before the window: none of its calls count
        loader.start(start)
        assert time.monotonic_ns() >= start  # it answered once counting was on
        end = time.monotonic_ns() + 300_000_000
        document = loader.stop(end)
    finally:
        loader.close()
    window = document["window"]
    assert start <= window["start_ns"] < start + 100_000_000, (start, window)
    assert end <= window["end_ns"] < end + 100_000_000, (end, window)
    assert document["roles"]["server"]["select"]["calls"] == 0


def test_a_window_instant_that_is_not_a_number_is_refused(ktrace_bin: Path, workloads: list):
    workload = Workload("select", 10, 1)
    workloads.append(workload)
    loader = Loader(ktrace_bin, "--pid", str(workload.pid))
    try:
        assert exchange(loader.proc, "start soon") == ""
        assert loader.proc.wait(timeout=10) == 2
        assert "expected 'start' or 'start NS'" in loader.proc.stderr.read()
    finally:
        loader.close()
