"""Samplers against known loads: a pinned busy loop, loopback traffic, perf availability."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clients import pinning
from harness.manifest import tsc_hz
from harness.metrics import cpu, net, perf, profile
from harness.metrics.perfctl import ControlledPerf, PerfFailed
from harness.metrics.sampler import SamplerConfig, WindowSampler

BUSY_CPU = 1 if (os.cpu_count() or 1) > 1 else 0


@pytest.fixture
def busy_loop():
    proc = subprocess.Popen(["taskset", "-c", str(BUSY_CPU), sys.executable, "-c",
                             "while True: pass"])
    yield proc
    proc.kill()
    proc.wait()


def _sample(config: SamplerConfig, seconds: float) -> tuple[dict, list[dict]]:
    async def window():
        sampler = WindowSampler(config)
        await sampler.prepare()
        await sampler.start()
        await asyncio.sleep(seconds)
        return await sampler.stop(), sampler.timeseries
    return asyncio.run(window())


@pytest.mark.timing
def test_pinned_busy_loop_reads_busy_on_its_cpu(busy_loop, tmp_path: Path):
    totals, series = _sample(SamplerConfig(server_pid=busy_loop.pid, server_cpu=BUSY_CPU,
                                           workdir=tmp_path, tsc_hz=2e9), 2.0)
    # The CPU it is pinned to is never idle, whatever else shares it.
    assert totals["cpu_idle_pct"] < 5
    assert totals["cpu_user_pct"] > 40
    # The process gets most of it (other processes may share the CPU on a busy machine).
    assert 40 < totals["cpu_server_pct"] <= 105
    # a user-space loop: mostly user time (beside the suite, ticks that land on other tasks'
    # softirq work while it runs are charged to it as system time: up to 23 % seen)
    assert totals["cpu_server_sys_pct"] < totals["cpu_server_user_pct"]
    per_second = [s["value"] for s in series
                  if s["source"] == "server_proc" and s["metric"] == "cpu_pct"]
    assert len(per_second) >= 1 and all(v > 30 for v in per_second)


def test_idle_process_reads_near_zero(tmp_path: Path):
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        totals, _ = _sample(SamplerConfig(server_pid=sleeper.pid, server_cpu=0,
                                          workdir=tmp_path, tsc_hz=2e9), 1.2)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert totals["cpu_server_pct"] < 2


# 0.5 ms of CPU every 250 ms: 0.2 % and its wake-ups' cost (up to 0.5 ms each beside the
# suite), well under one 10 ms tick in a 1 s window
SIPPING = """
import sys, time
print("started", flush=True)
while True:
    start = time.process_time()
    while time.process_time() - start < 0.0005:
        pass
    time.sleep(0.25)
"""


@pytest.mark.timing
def test_a_server_using_less_than_a_tick_a_second_reads_what_it_used(tmp_path: Path):
    """Before: the total counted 10 ms ticks, and such a server (a few hundred requests a
    second) read 0 % or 1 %; schedstat counts nanoseconds."""
    sipper = subprocess.Popen([sys.executable, "-c", SIPPING], stdout=subprocess.PIPE, text=True)
    try:
        # The interpreter's start-up (tens of ms of CPU, longer beside the suite) stays out of
        # the window: it opens once the sipper says it has started.
        assert sipper.stdout is not None and sipper.stdout.readline() == "started\n"
        totals, _ = _sample(SamplerConfig(server_pid=sipper.pid, server_cpu=0,
                                          workdir=tmp_path, tsc_hz=2e9), 1.0)
    finally:
        sipper.kill()
        sipper.wait()
    assert 0.1 < totals["cpu_server_pct"] < 0.8  # ticks: 0 % or 1 %


def test_process_tree_includes_children():
    parent = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30 & wait"])
    try:
        for _ in range(100):
            tree = cpu.process_tree(parent.pid)
            if len(tree) == 3:
                break
            asyncio.run(asyncio.sleep(0.02))
        assert len(tree) == 3 and tree[0] == parent.pid
    finally:
        subprocess.run(["pkill", "-P", str(parent.pid)])
        parent.kill()
        parent.wait()


def test_net_counters_see_loopback_segments():
    before = net.net_counters(os.getpid())
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        conn, _ = server.accept()
        for _ in range(50):
            client.sendall(b"x" * 100)
            conn.recv(100)
        client.close()
        conn.close()
    delta = net.delta(before, net.net_counters(os.getpid()))
    assert delta["packets_in"] >= 50 and delta["packets_out"] >= 50
    assert delta["bytes_in"] >= 5000


def test_cycles_are_measured_or_labelled_estimated(busy_loop, tmp_path: Path):
    counters, reason = perf.hardware_counters()
    hz, _ = tsc_hz()
    totals, _ = _sample(SamplerConfig(server_pid=busy_loop.pid, server_cpu=BUSY_CPU,
                                      workdir=tmp_path, tsc_hz=hz,
                                      hardware_counters=counters), 1.0)
    assert totals["cycles"] and totals["cycles"] > 0
    assert totals["cycles_estimated"] is (not counters)
    if not counters:
        print(f"no hardware counters ({reason}): cycles estimated")
        assert totals["instructions"] is None and totals["cache_misses"] is None
        # ~1 s of a fully busy CPU at the TSC frequency.
        assert 0.5 * hz < totals["cycles"] < 1.5 * hz


def test_perf_stat_output_parses():
    text = ("# started on Sat\n\n123456,,cycles,100,100.00,,\n"
            "<not supported>,,instructions,0,100.00,,\n7,,cache-misses:u,100,100.00,,\n")
    assert perf.parse_stat(text) == {"cycles": 123456.0, "instructions": None,
                                     "cache-misses": 7.0}


@pytest.fixture
def perf_cpus_busy():
    """Every CPU but the busy loop's busy too, at normal priority: perf's CPUs beside a
    generator at full speed."""
    others = sorted(pinning.all_but(BUSY_CPU)) or [BUSY_CPU]
    hogs = [subprocess.Popen(["taskset", "-c", str(c), sys.executable, "-c", "while True: pass"])
            for c in others]
    yield
    for hog in hogs:
        hog.kill()
        hog.wait()


def _needs_perf() -> None:
    if subprocess.run(["perf", "--version"], capture_output=True).returncode != 0:
        pytest.skip("perf is not installed")


def test_profile_groups_symbols_by_layer(busy_loop, tmp_path: Path):
    _needs_perf()
    _sample(SamplerConfig(server_pid=busy_loop.pid, server_cpu=BUSY_CPU, workdir=tmp_path,
                          tsc_hz=2e9, profile=True), 1.0)
    sampler_rows = profile.report(tmp_path / "perf.data")
    assert sampler_rows, "perf record produced no samples"
    layers = {row["layer"] for row in sampler_rows}
    assert "user" in layers  # the busy loop runs in user mode
    assert 80 < sum(r["pct"] for r in sampler_rows) <= 100.5  # symbols under 0.1 % cut


@pytest.mark.timing
def test_profile_covers_the_window_while_perfs_cpus_are_busy(busy_loop, perf_cpus_busy,
                                                             tmp_path: Path):
    """Before: perf started at idle priority at the window's start, and with its CPUs busy
    it never ran and recorded nothing (CI). Now it starts before the window and counts from
    its first instant: cpu-clock samples a fully busy CPU 4,000 times a second. (Beside the
    suite 2,974 were seen in the symbols over the report's 0.1 % cut: many small ones are
    other tasks' on the busy CPU. Half the window still fails a perf 0.5 s late.)"""
    _needs_perf()
    _sample(SamplerConfig(server_pid=busy_loop.pid, server_cpu=BUSY_CPU, workdir=tmp_path,
                          tsc_hz=2e9, profile=True), 1.0)
    samples = sum(row["samples"] for row in profile.report(tmp_path / "perf.data"))
    assert 0.5 * 4000 <= samples <= 1.3 * 4000
    assert not list(tmp_path.glob("perf-*.ctl")), "fifos left behind"


@pytest.mark.timing
def test_perf_stat_counts_only_while_switched_on(busy_loop, tmp_path: Path):
    """The counters' perf stat goes through the same control as the profile's record; here
    on cpu-clock, which needs no counters: ~0.5 s of a busy CPU, not the 1.5 s perf ran."""
    _needs_perf()
    out = tmp_path / "perf-stat.txt"
    argv = ["perf", "stat", "-x,", "-o", str(out), "-e", "cpu-clock", "-C", str(BUSY_CPU)]
    controlled = ControlledPerf("stat", argv, pinning.all_but(BUSY_CPU) or {0}, tmp_path)

    async def window():
        try:
            await controlled.start()
            await asyncio.sleep(0.5)  # running, switched off
            await controlled.enable()
            await asyncio.sleep(0.5)
        finally:
            await controlled.stop()
    asyncio.run(window())
    counted_ms = perf.parse_stat(out.read_text())["cpu-clock"]
    assert counted_ms is not None and 300 < counted_ms < 800


def test_a_perf_that_cannot_start_is_named_with_what_it_said(tmp_path: Path):
    _needs_perf()
    controlled = ControlledPerf("record", ["perf", "record", "--no-such-option"], {0}, tmp_path)

    async def start():
        try:
            await controlled.start()
        finally:
            await controlled.stop()
    with pytest.raises(PerfFailed, match=r"perf record exited with status \d+: .*no-such-option"):
        asyncio.run(start())


def test_a_profile_samples_cycles_only_where_there_are_counters(tmp_path: Path):
    out = tmp_path / "perf.data"
    assert "cycles" in profile.record_argv(0, out, hardware_counters=True)
    assert "cpu-clock" not in profile.record_argv(0, out, hardware_counters=True)
    assert "cpu-clock" in profile.record_argv(0, out, hardware_counters=False)


def test_layer_classification():
    assert profile.layer_of("tcp_sendmsg", True) == "tcp"
    assert profile.layer_of("ip_finish_output2", True) == "ip"
    assert profile.layer_of("__netif_receive_skb_core", True) == "link"
    assert profile.layer_of("loopback_xmit", True) == "driver"
    assert profile.layer_of("do_select", True) == "syscall"
    assert profile.layer_of("pv_native_safe_halt", True) == "idle"
    assert profile.layer_of("http_parse", False) == "user"
    assert profile.layer_of("schedule", True) == "other"


def test_a_process_that_exits_keeps_its_cpu_in_the_total():
    proc = subprocess.Popen([sys.executable, "-c",
                             "import time\nt = time.process_time()\n"
                             "while time.process_time() - t < 1.0: pass"])
    tree = cpu.TreeCpu([proc.pid])
    first = 0.0
    while proc.poll() is None and first < 0.1:
        first = sum(tree.read())
    assert first >= 0.1, "read the busy process before it exited"
    proc.wait()
    # Gone now: the last reading stands, the total never goes backwards.
    assert sum(tree.read()) >= first


def test_schedstat_counts_a_busy_tree_to_the_nanosecond(busy_loop):
    tree = cpu.TreeSchedstat(busy_loop.pid)
    seconds0, periods0 = tree.read()
    ticks0 = sum(cpu.pid_cpu_s(busy_loop.pid) or (0.0, 0.0))
    subprocess.run(["sleep", "0.5"], check=True)
    seconds1, periods1 = tree.read()
    ticks1 = sum(cpu.pid_cpu_s(busy_loop.pid) or (0.0, 0.0))
    # the loop ran most of the half second, and both clocks agree to their 10 ms ticks
    assert 0.2 < seconds1 - seconds0 <= 0.55
    assert seconds1 - seconds0 == pytest.approx(ticks1 - ticks0, abs=0.03)
    assert periods1 >= periods0 >= 1


def times(at: float | None, busy_ticks: float, idle: float, steal: float) -> cpu.CpuTimes:
    seconds = dict.fromkeys(cpu.CPU_FIELDS, 0.0)
    seconds.update(user=busy_ticks, idle=idle, steal=steal)
    return cpu.CpuTimes(seconds, at)


def test_busy_time_is_the_wall_clock_less_measured_idle_where_ticks_miss_it():
    # a server woken thousands of times a second, each run shorter than a tick: in one
    # second the tick saw 0.03 s busy; the kernel measured 0.85 s idle; the host stole 0.05
    first, last = times(100.0, 10.0, 50.0, 1.0), times(101.0, 10.03, 50.85, 1.05)
    assert cpu.busy_s_between(first, last) == pytest.approx(0.1)
    assert cpu.cpu_percentages(first, last)["idle_pct"] == pytest.approx(85)
    # readings without a clock (a /proc/stat a test wrote): the ticks alone
    first, last = times(None, 10.0, 50.0, 1.0), times(None, 10.03, 50.85, 1.05)
    assert cpu.busy_s_between(first, last) == pytest.approx(0.03)


def test_a_real_reading_carries_its_time_and_a_written_one_does_not(tmp_path: Path):
    assert cpu.cpu_times(0).read_at_s is not None
    stat = tmp_path / "stat"
    stat.write_text(cpu.PROC_STAT.read_text())
    assert cpu.cpu_times(0, stat).read_at_s is None


THREADS = """
import threading, time
for _ in range(3):
    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
print("ready", flush=True)
time.sleep(30)
"""


def allowed_cpus(pid: int) -> set[str]:
    return {line.split()[1] for task in Path(f"/proc/{pid}/task").iterdir()
            for line in (task / "status").read_text().splitlines()
            if line.startswith("Cpus_allowed_list:")}


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two CPUs to move between")
def test_pinning_a_running_process_moves_every_thread():
    proc = subprocess.Popen([sys.executable, "-c", THREADS], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        assert len(list(Path(f"/proc/{proc.pid}/task").iterdir())) == 4
        assert allowed_cpus(proc.pid) != {"1"}
        pinning.pin_running(proc.pid, pinning.all_but(0))
        assert allowed_cpus(proc.pid) == {",".join(map(str, sorted(pinning.all_but(0))))}
    finally:
        proc.kill()
        proc.wait()


def _exec_done(proc: subprocess.Popen, comm: str) -> None:
    """Waits until the prefixes (taskset, chrt) have exec'd the command itself."""
    deadline = time.monotonic() + 10
    while Path(f"/proc/{proc.pid}/comm").read_text().strip() != comm:
        assert time.monotonic() < deadline, f"{comm} never started"
        time.sleep(0.01)


def test_a_running_process_drops_to_idle_priority_and_back():
    process = subprocess.Popen(pinning.pin_set_argv({0}) + ["sleep", "30"])
    try:
        _exec_done(process, "sleep")
        assert os.sched_getscheduler(process.pid) == os.SCHED_OTHER
        assert allowed_cpus(process.pid) == {"0"}
        pinning.set_idle(process.pid, True)
        assert os.sched_getscheduler(process.pid) == os.SCHED_IDLE
        pinning.set_idle(process.pid, False)
        assert os.sched_getscheduler(process.pid) == os.SCHED_OTHER
    finally:
        process.kill()
        process.wait()
