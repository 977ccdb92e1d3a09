"""wb-server's command line, stats file, workers and sink mode; `wanbench server`."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.servers import Counters, ServerConfig, describe, read_stats, running, wait_ready

from .http_client import Client, request

try:
    from tests.conftest import build
except ImportError:  # plain `pytest`: tests/ is on sys.path
    from conftest import build  # type: ignore[no-redef]

BACKENDS = describe(build("build/bin/wb-server")).dispatches
STATS_KEYS = {
    "schema", "backend", "accept", "reply_bytes", "pid", "workers", "uptime_s",
    "monotonic_ns",
    "connections_accepted", "connections_closed", "connections_current", "connections_max",
    "requests", "replies", "bytes_in", "bytes_out", "dispatch_calls", "dispatch_events",
    "ctl_calls", "signals_dequeued", "sigio_overflows", "fallback_rescans", "accept_calls",
    "accept_eagain", "replies_400", "replies_431", "replies_501", "emfile_events",
}


@pytest.mark.parametrize(("args", "named"), [
    (["--bogus"], "--bogus"),
    (["--dispatch", "kqueue"], "kqueue"),
    (["--accept", "0"], "--accept"),
    (["--listen", "localhost:80"], "--listen"),
    (["--listen", "127.0.0.1:70000"], "port"),
    (["--listen", "::1:80"], "--listen"),
    (["--listen", "[::1]"], "--listen"),
    (["--listen", "[127.0.0.1]:80"], "--listen"),
    (["--reply-bytes", "-1"], "--reply-bytes"),
    (["--workers"], "--workers"),
])
def test_bad_flags_exit_2_naming_the_problem(normal_binary: Path, args: list[str],
                                             named: str) -> None:
    out = subprocess.run([str(normal_binary), *args], capture_output=True, text=True, timeout=10)
    assert out.returncode == 2
    assert named in out.stderr and "usage:" in out.stderr


@pytest.mark.skipif(not Path("/proc/net/if_inet6").exists(), reason="no IPv6 in this kernel")
@pytest.mark.parametrize("dispatch", ["epoll", "select", "uring"])
def test_listens_on_ipv6(normal_binary: Path, tmp_path: Path, dispatch: str) -> None:
    cfg = ServerConfig(dispatch=dispatch, listen="[::1]:0", stats_path=tmp_path / "s.json")
    with running(cfg, normal_binary) as server:
        assert server.host == "::1" and server.address == f"[::1]:{server.port}"
        with Client("::1", server.port) as c:
            assert c.get().status == 200
            assert c.get().status == 200
        assert server.snapshot()["requests"] == 2


def test_the_description_is_the_binary_s_own(normal_binary: Path) -> None:
    """--describe names what the parser takes: the usage line's backends, and each default
    is what a bare invocation's stats report."""
    said = describe(normal_binary)
    out = subprocess.run([str(normal_binary), "--help"], capture_output=True, text=True,
                         timeout=10)
    listed = re.search(r"--dispatch (\S+)", out.stdout)
    assert listed and tuple(listed.group(1).split("|")) == said.dispatches
    assert {"select", "poll", "epoll"} <= set(said.dispatches)
    assert said.defaults["dispatch"] in said.dispatches


def binary_takes(binary: Path, flag: str, value: str) -> bool:
    """Whether wb-server's parser takes `flag value`; the unknown flag after it stops the
    run at parsing either way."""
    out = subprocess.run([str(binary), flag, value, "--not-a-flag"], capture_output=True,
                         text=True, timeout=10)
    assert out.returncode == 2, out.stderr
    return "unknown flag --not-a-flag" in out.stderr


def python_takes(flag: str, value: str) -> bool:
    field = {"--source": "source_mbps"}.get(flag) or flag.removeprefix("--").replace("-", "_")
    number = float if field == "source_mbps" else int
    try:
        ServerConfig(**{field: value if field in ("dispatch", "accept") else number(value)})
    except ValueError:
        return False
    return True


def edges(limit: str) -> list[str]:
    """Each end of a described range and one step past it."""
    low, high = describe().limits[limit]
    return [str(n) for n in (low - 1, low, high, high + 1)]


# The description's limits hold the parser both ways: each end is taken, one past it refused.
@pytest.mark.parametrize(("flag", "value"), [
    *(("--dispatch", d) for d in (*BACKENDS, "kqueue")),
    *(("--accept", a) for a in ("single", "multi", "some", "01", *edges("accept"))),
    *(("--reply-bytes", n) for n in edges("reply_bytes")),
    *(("--workers", n) for n in edges("workers")),
    *(("--backlog", n) for n in edges("backlog")),
    *(("--min-wait-us", n) for n in edges("min_wait_us")),
    *(("--source", n) for n in edges("source_mbps")),
])
def test_the_binary_refuses_what_its_description_refuses(normal_binary: Path, flag: str,
                                                         value: str) -> None:
    assert binary_takes(normal_binary, flag, value) == python_takes(flag, value)


def test_server_config_refuses_unknown_values() -> None:
    with pytest.raises(ValueError, match="kqueue"):
        ServerConfig(dispatch="kqueue")
    with pytest.raises(ValueError, match="accept"):
        ServerConfig(accept="some")


def test_stats_snapshot_then_final_on_sigterm(normal_binary: Path, tmp_path: Path) -> None:
    cfg = ServerConfig(dispatch="poll", accept="4", reply_bytes=1259,
                       stats_path=tmp_path / "s.json")
    with running(cfg, normal_binary) as server:
        with Client(server.host, server.port) as c:
            c.get()
            snap = server.snapshot()
            assert set(snap) == STATS_KEYS
            assert (snap["schema"], snap["backend"], snap["accept"]) == (1, "poll", "4")
            assert snap["pid"] == server.proc.pid and snap["workers"] == 1
            assert snap["requests"] == snap["replies"] == 1
            assert snap["bytes_out"] > 1259 and snap["connections_current"] == 1
            c.get()  # a snapshot leaves the server running
        for _ in range(500):
            if server.snapshot()["connections_closed"] == 1:
                break
        assert server.stop() == 0
    final = read_stats(tmp_path / "s.json")
    assert final["requests"] == 2 and final["connections_closed"] == 1
    assert not list(tmp_path.glob("*.tmp.*"))  # written via a temporary file and rename


def test_an_idle_server_sleeps_until_a_signal_wakes_it(normal_binary: Path,
                                                       tmp_path: Path) -> None:
    """The wait has no timeout (a self-pipe makes signals wake it): idle, the server makes
    no dispatch calls at all; a loop waiting with a 1 s timeout would make 3 more here. Every
    backend's server idles through the same 3.5 s."""
    with contextlib.ExitStack() as stack:
        servers = {dispatch: stack.enter_context(running(
            ServerConfig(dispatch=dispatch, stats_path=tmp_path / f"{dispatch}.json"),
            normal_binary)) for dispatch in BACKENDS}
        first = {dispatch: server.snapshot()["dispatch_calls"]
                 for dispatch, server in servers.items()}
        time.sleep(3.5)
        # from the first snapshot to the second: the wait the first signal's wake-up byte
        # ends, and the wait the second signal interrupts
        woken = {dispatch: server.snapshot(timeout=2.0)["dispatch_calls"] - first[dispatch]
                 for dispatch, server in servers.items()}
        assert all(calls <= 2 for calls in woken.values()), woken
        for server in servers.values():
            with Client(server.host, server.port) as c:
                assert c.get().status == 200
            assert server.stop(timeout=2.0) == 0


def test_workers_share_the_port_and_merge_stats(normal_binary: Path, tmp_path: Path) -> None:
    cfg = ServerConfig(dispatch="epoll", workers=2, stats_path=tmp_path / "s.json")
    with running(cfg, normal_binary) as server:
        clients = [Client(server.host, server.port) for _ in range(40)]
        for c in clients:
            assert c.get().status == 200
            c.close()
        stats = server.snapshot()
        assert stats["workers"] == 2 and len(stats["per_worker"]) == 2
        per = stats["per_worker"]
        assert len({w["pid"] for w in per} | {stats["pid"]}) == 3
        for key in ("requests", "connections_accepted", "bytes_out"):
            assert stats[key] == sum(w[key] for w in per)
        assert stats["requests"] == 40
        assert all(w["connections_accepted"] > 0 for w in per)  # SO_REUSEPORT spreads them
        assert server.stop() == 0
        assert server.proc.stdout is not None
    assert read_stats(tmp_path / "s.json")["requests"] == 40


HOLD_OFF_S = 0.2  # long beside the test's own steps, so that a busy machine cannot blur it
LULL_S = 4 * HOLD_OFF_S  # a hold-off may be under way when it starts: then 3 are left
GAP_S = HOLD_OFF_S / 6  # the server is surely waiting again, or holding off, by then


def answered_after_s(client: Client) -> float:
    time.sleep(GAP_S)
    started = time.monotonic()
    client.send(request())
    assert client.reply().status == 200
    return time.monotonic() - started


@pytest.mark.timing
@pytest.mark.parametrize("dispatch", ["epoll", "uring"])  # the loop's, and the odd one's wait
def test_min_wait_holds_requests_while_they_keep_coming_and_not_after_a_lull(
        normal_binary: Path, tmp_path: Path, dispatch: str) -> None:
    cfg = ServerConfig(dispatch=dispatch, min_wait_us=int(HOLD_OFF_S * 1e6),
                       stats_path=tmp_path / "s.json")
    with running(cfg, normal_binary) as server:
        first, second, third = (Client(server.host, server.port) for _ in range(3))
        with first, second, third:
            time.sleep(LULL_S)  # the accepts came in a quick run: a lull ends it
            # after a lull a request is answered at once; the second comes a gap later,
            # within the hold-off of the wait that found it: requests keep coming
            assert answered_after_s(first) < HOLD_OFF_S / 2
            assert answered_after_s(second) < HOLD_OFF_S / 2
            # so the server sleeps the hold-off before it waits again, whoever sends
            assert answered_after_s(third) > HOLD_OFF_S / 2
            time.sleep(LULL_S)
            assert answered_after_s(first) < HOLD_OFF_S / 2
        assert server.snapshot()["replies"] == 4


def test_sink_reads_and_never_replies(normal_binary: Path, tmp_path: Path) -> None:
    cfg = ServerConfig(dispatch="uring", sink=True, stats_path=tmp_path / "s.json")
    with running(cfg, normal_binary) as server:
        with socket.create_connection((server.host, server.port), timeout=10) as s:
            s.sendall(request() * 10 + b"x" * 1_000_000)
            s.shutdown(socket.SHUT_WR)
            assert s.recv(1) == b""  # closed after the data, nothing sent back
        stats = server.snapshot()
    assert stats["bytes_in"] == len(request()) * 10 + 1_000_000
    assert stats["replies"] == stats["bytes_out"] == 0


def test_source_sends_its_stream_and_never_replies(normal_binary: Path, tmp_path: Path) -> None:
    """--source: a connection that asks for nothing gets one-segment writes of the stream;
    a request it sends is read and discarded, never answered."""
    cfg = ServerConfig(dispatch="poll", source_mbps=8, stats_path=tmp_path / "s.json")
    with running(cfg, normal_binary) as server:
        with socket.create_connection((server.host, server.port), timeout=10) as s:
            s.sendall(request())
            received = b""
            while len(received) < 10 * 1460:  # 8 Mbit/s: a millisecond and a half each
                received += s.recv(65536)
        stats = server.snapshot()
    assert set(received) == {ord("x")}  # the stream's bytes, no HTTP reply among them
    assert stats["bytes_in"] == len(request()) and stats["replies"] == 0


def test_sink_and_source_are_refused_together(normal_binary: Path) -> None:
    out = subprocess.run([str(normal_binary), "--sink", "--source", "10"], capture_output=True,
                         text=True, timeout=10)
    assert out.returncode == 2 and "either receives the stream or sends it" in out.stderr
    with pytest.raises(ValueError, match="either receives the stream or sends it"):
        ServerConfig(sink=True, source_mbps=10)


def test_wanbench_server_runs_in_the_foreground(normal_binary: Path, tmp_path: Path) -> None:
    stats_path = tmp_path / "s.json"
    env = {**os.environ, "WANBENCH_BIN": str(normal_binary.parent)}
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "server", "--dispatch",
                             "devpoll", "--stats", str(stats_path)],
                            stdout=subprocess.PIPE, env=env)
    try:
        host, port = wait_ready(proc, 10)
        with Client(host, port) as c:
            assert c.get().status == 200
        proc.send_signal(signal.SIGTERM)  # forwarded to wb-server, which writes its stats
        assert proc.wait(10) == 0
    finally:
        proc.kill()
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
    stats = json.loads(stats_path.read_text())
    assert stats["backend"] == "devpoll" and stats["requests"] == 1


def test_cpu_pinning_and_a_busy_port(normal_binary: Path, tmp_path: Path) -> None:
    with running(ServerConfig(cpu=0), normal_binary) as server:
        status = Path(f"/proc/{server.proc.pid}/status").read_text()
        assert "Cpus_allowed_list:\t0\n" in status
        taken = ServerConfig(listen=server.address).argv(normal_binary)
        out = subprocess.run(taken, capture_output=True, text=True, timeout=10)
        assert out.returncode == 1 and f"cannot listen on {server.address}" in out.stderr


def test_workers_die_with_a_killed_parent(normal_binary: Path, tmp_path: Path) -> None:
    cfg = ServerConfig(workers=3, stats_path=tmp_path / "s.json")
    with running(cfg, normal_binary) as server:
        workers = [w["pid"] for w in server.snapshot()["per_worker"]]
        server.proc.kill()
        server.proc.wait()
    survivors = []
    for pid in workers:
        for _ in range(1000):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.005)
        else:
            survivors.append(pid)
            os.kill(pid, signal.SIGKILL)  # fail, but leave nothing running
    assert not survivors, f"workers {survivors} outlived their parent"


@pytest.mark.parametrize("in_memory", [False, True], ids=["file", "memfd"])
@pytest.mark.parametrize("workers", [1, 2])
def test_counters_are_read_without_the_event_loop(normal_binary: Path, tmp_path: Path,
                                                  workers: int, in_memory: bool) -> None:
    counters = Counters.in_memory() if in_memory else Counters(tmp_path / "c")
    assert counters.read() is None  # no server yet: nothing to read, no error
    cfg = ServerConfig(workers=workers, stats_path=tmp_path / "s.json",
                       counters_path=counters.path)
    with running(cfg, normal_binary, pass_fds=counters.pass_fds) as server:
        for _ in range(6):
            with Client(server.host, server.port) as c:
                assert c.get().status == 200
        snapshot = server.snapshot()
        # a stopped server answers no signal, and its counters read all the same
        stopped = [server.proc.pid, *(w["pid"] for w in snapshot.get("per_worker", []))]
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        try:
            before = time.monotonic_ns()
            reading = counters.read()
            assert reading is not None and before <= reading["monotonic_ns"] <= time.monotonic_ns()
        finally:
            for pid in stopped:
                os.kill(pid, signal.SIGCONT)
        counters.close()
    assert reading["requests"] == reading["replies"] == snapshot["requests"] == 6
    assert reading["workers"] == workers
    # what the replies the client got had settled (closes and the dispatch counters may move
    # on after the snapshot: its signal woke the loop)
    settled = {"requests", "replies", "connections_accepted", "bytes_in", "bytes_out"}
    assert {k: reading[k] for k in settled} == {k: snapshot[k] for k in settled}
    if workers > 1:
        assert [w["pid"] for w in reading["per_worker"]] == \
            [w["pid"] for w in snapshot["per_worker"]]
        assert sum(w["requests"] for w in reading["per_worker"]) == 6


def test_a_file_that_is_not_counters_is_refused(tmp_path: Path) -> None:
    (tmp_path / "c").write_bytes(b"{not counters}" * 10)
    with pytest.raises(ValueError, match="not wb-server's counters file"):
        Counters(tmp_path / "c").read()
