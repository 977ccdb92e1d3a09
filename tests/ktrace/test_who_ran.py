"""wb-whoran --cpu CPU: who ran on the generator's CPU and behind whom the generator waited
there, against tasks whose doings are known: a real-time task that holds the CPU in 5 ms
stalls (as kdamond, a kernel thread the kernel does not preempt, held CPU 1 in the demo) is
another task the generator waited behind; a child the generator forked (its own shard) and
the CPU's idle time are not."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clients import validity
from harness.metrics import whoran
from harness.metrics.whoran import WhoRan
from tests.conftest import STALLER
from tests.ktrace.conftest import Loader

CPU = max(os.sched_getaffinity(0))
# wakes every 250 µs and works a little, as a generator at 4,000 sends a second does
GENERATOR = f"""
import os, sys, time
os.sched_setaffinity(0, {{{CPU}}})
if sys.argv[1:] == ["--busy-child"] and os.fork() == 0:  # its own shard: busy on its CPU
    while True:
        pass
print("ready", flush=True)
while True:
    time.sleep(0.00025)
    sum(range(200))
"""
@pytest.fixture
def started() -> Iterator[list[subprocess.Popen]]:
    """Processes started in sessions of their own: each killed with its whole group (the
    generator's busy child too)."""
    procs: list[subprocess.Popen] = []
    yield procs
    for proc in procs:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _generator(started: list[subprocess.Popen], *args: str,
               priority: tuple[str, ...] = ()) -> subprocess.Popen:
    proc = subprocess.Popen([*priority, sys.executable, "-c", GENERATOR, *args],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    started.append(proc)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def _generator_and_staller(started: list[subprocess.Popen]) -> tuple[subprocess.Popen,
                                                                      subprocess.Popen]:
    """The generator, and a real-time task holding its CPU 5 ms in every 50."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: the loader and the staller would share the generator's")
    generator = _generator(started)
    staller = subprocess.Popen(["chrt", "-f", "10", "taskset", "-c", str(CPU), sys.executable,
                                "-c", STALLER], start_new_session=True)
    started.append(staller)
    return generator, staller


def _window(binary: Path, generator: subprocess.Popen, seconds: float = 1.5,
            role: str = "--generator-pid", late_us: str = "1000") -> WhoRan:
    loader = Loader(binary, "--cpu", str(CPU), role, str(generator.pid), "--late-us", late_us)
    try:
        loader.start()
        subprocess.run(["sleep", str(seconds)], check=True)
        return WhoRan.of(loader.stop())
    finally:
        loader.close()


def test_a_task_holding_the_generators_cpu_is_who_it_waited_behind(whoran_bin: Path,
                                                                  started: list):
    generator, staller = _generator_and_staller(started)
    window = _window(whoran_bin, generator)
    held = next(t for t in window.tasks if t.pid == staller.pid)
    # 5 ms in every 50: about 10 % of the window (the hypervisor may stretch it)
    assert 0.04 < held.ran_s / window.window_s < 0.3, window
    assert held.comm.startswith("python"), held
    # woken every 250 µs, the generator was runnable through most of each stall
    assert window.waited_behind_others_s > 0.5 * held.ran_s, window
    assert window.waited_behind_others_s <= window.waited_s
    assert "python" in window.named()
    # past 1 ms of each wait: the 4 ms after each stall's first, which make sends late
    assert 0.3 * held.ran_s < window.late_behind_others_s < window.waited_behind_others_s


@pytest.mark.timing
def test_the_runs_own_emulator_is_not_another_task(whoran_bin: Path, started: list):
    """--own-pid (the run's link emulators): the same staller as above, given as the run's
    own, holds the CPU as long, but its time is the run's own and waiting behind it is not
    waiting behind others (a neighbour's doing, which a point is measured again for)."""
    generator, staller = _generator_and_staller(started)
    loader = Loader(whoran_bin, "--cpu", str(CPU), "--generator-pid", str(generator.pid),
                    "--late-us", "1000", "--own-pid", str(staller.pid))
    try:
        loader.start()
        subprocess.run(["sleep", "1.5"], check=True)
        window = WhoRan.of(loader.stop())
    finally:
        loader.close()
    assert 0.04 < window.own_s / window.window_s < 0.3, window
    assert staller.pid not in {t.pid for t in window.tasks}, window
    # the generator waited behind it (runnable through most of each stall), and that wait is
    # not counted behind others (who may hold the CPU too, beside the suite)
    assert window.waited_s - window.waited_behind_others_s > 0.5 * window.own_s, window


def test_the_generators_own_shard_is_not_another_task(whoran_bin: Path, started: list):
    """A busy child of the generator's shares its CPU: the generator waits behind it, but that
    is the generator's own work, not another task's."""
    generator = _generator(started, "--busy-child")
    (child,) = map(int, Path(f"/proc/{generator.pid}/task/{generator.pid}/children")
                   .read_text().split())
    before = _ran_s(child)
    window = _window(whoran_bin, generator)
    child_ran_s = _ran_s(child) - before
    # all the child's time on the CPU (pinned there) is counted as the generator's
    assert child_ran_s > 0.01, child_ran_s
    assert window.measured_s > 0.9 * child_ran_s, (window, child_ran_s)
    assert child not in {t.pid for t in window.tasks}, window
    assert window.waited_behind_others_s <= window.waited_s
    assert window.late_behind_others_s <= window.waited_behind_others_s


def test_every_slice_is_who_ran_it_when_switches_go_unreported(whoran_bin: Path, started: list):
    """Some kernels do not report some tasks' switches out (here the VM agent's threads, PID 1's
    tokio-rt-worker, which wake on every CPU): the slice that began with such a task then ends
    with another. Credited to the task it began with, the generator's run (or idle time) once
    read as another task's, under the generator's own pid, and as time it waited behind
    others. Each such slice is split by the kernel's own account of the task that ended it."""
    generator = _generator(started)
    for _ in range(6):  # those threads run here about once a second
        window = _window(whoran_bin, generator, seconds=1.0)
        pids = {t.pid for t in window.tasks}
        assert generator.pid not in pids and 0 not in pids, window


def _ran_s(pid: int) -> float:
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


def _waited_s(pid: int) -> float:
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9


def _server_window(binary: Path, server: subprocess.Popen) -> tuple[WhoRan, float]:
    """The server's CPU traced over a window, and its wait there (schedstat), % of it."""
    before = _waited_s(server.pid)
    window = _window(binary, server, role="--pid", late_us="0")
    return window, 100 * (_waited_s(server.pid) - before) / window.window_s


@pytest.mark.parametrize("stalled", [True, False])
def test_on_the_servers_cpu_a_staller_crowds_the_server_and_others_it_never_waited_for_do_not(
        whoran_bin: Path, started: list, stalled: bool):
    """--pid: the server's tree is the measured one. A real-time task holding its CPU 10 ms
    in every 50 (20 %) is whom the server, woken every 250 µs, waited behind: crowded_server
    on the traced wait. The other way, the server itself real-time (above every task the
    machine runs beside these tests): whatever else ran on its CPU, it did not wait for them,
    and the rule holds its peace."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: the loader and the staller would share the server's")
    # wakes every 250 µs: a server at 4,000 requests a second
    server = _generator(started, priority=() if stalled else ("chrt", "-f", "20"))
    if stalled:
        staller = subprocess.Popen(["chrt", "-f", "10", "taskset", "-c", str(CPU),
                                    sys.executable, "-c", STALLER.replace("0.005", "0.010")
                                    .replace("0.045", "0.040")], start_new_session=True)
        started.append(staller)
    window, waited_pct = _server_window(whoran_bin, server)
    assert window.role == "server"
    assert server.pid not in {t.pid for t in window.tasks}, window
    wait_others_pct = 100 * window.late_behind_others_s / window.window_s
    # no late threshold on the server's side: every wait behind others counts
    assert window.late_behind_others_s == window.waited_behind_others_s
    reason = validity.crowded(waited_pct, CPU, 100 * window.others_s / window.window_s,
                              wait_others_pct)
    if stalled:
        held = next(t for t in window.tasks if t.pid == staller.pid)
        assert 0.1 < held.ran_s / window.window_s < 0.4, window
        assert reason is not None and reason.code is validity.Code.CROWDED_SERVER, (
            window, waited_pct)
    else:
        assert wait_others_pct < validity.WAIT_LIMIT_PCT, window
        assert reason is None, (window, waited_pct)


def test_a_refused_cpu_is_not_traced_and_says_why(tmp_path: Path):
    """Under TCG the runner refuses who-ran on every CPU (the server's as the generator's): no
    loader starts, and the measure's fallback says why; a host without a generator says so."""

    async def window(traced: whoran.TracedCpu) -> whoran.Seen:
        await traced.prepare(None)
        await traced.start()
        try:
            return await traced.stop()
        finally:
            await traced.close()

    refused = "an emulated CPU (a guest under TCG)"
    for role in (whoran.SERVER, whoran.GENERATOR):
        seen = asyncio.run(window(whoran.TracedCpu(role, [os.getpid()], CPU, tmp_path,
                                                   refused=refused)))
        assert seen == whoran.Seen(None, refused)
    seen = asyncio.run(window(whoran.TracedCpu(whoran.GENERATOR, [], None, tmp_path)))
    assert seen == whoran.Seen(None, "no generator on this host")
    assert not list(tmp_path.iterdir())  # no loader ran: none of its files
