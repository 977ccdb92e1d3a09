"""Who may use a cluster: its scheduler and workers speak TLS only and accept only holders of
a certificate signed by the cluster's CA (`wanbench cluster certs`), since whoever submits
work to a worker runs code as root there; a plain tcp:// scheduler is refused unless
--insecure; a worker listens on one address, not on all interfaces."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from harness.cluster import ClusterError
from harness.cluster.coordinator import connect, connect_started
from harness.cluster.namespaces import stop_all
from harness.cluster.security import Access, Certs, access, write
from harness.commands.worker import worker_argv
from tests.conftest import REPO, free_port

distributed = pytest.importorskip("distributed", reason="the cluster extra is not installed")
WANBENCH = [sys.executable, "-m", "harness.cli"]


def wanbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*WANBENCH, *args], capture_output=True, text=True, timeout=60,
                          cwd=REPO)


def test_certs_writes_a_ca_and_the_node_certificate_it_signed(tmp_path: Path):
    directory = tmp_path / "certs"
    done = wanbench("cluster", "certs", str(directory))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in directory.iterdir()) == ["ca.pem", "node.key", "node.pem"]
    assert stat.S_IMODE((directory / "node.key").stat().st_mode) == 0o600
    verified = subprocess.run(["openssl", "verify", "-CAfile", str(directory / "ca.pem"),
                               str(directory / "node.pem")], capture_output=True, text=True)
    assert verified.returncode == 0, verified.stderr
    again = wanbench("cluster", "certs", str(directory))  # the hosts' trust is not replaced
    assert again.returncode == 2 and "already holds ca.pem, node.pem, node.key" in again.stderr
    assert "Traceback" not in again.stderr


def test_an_address_without_tls_is_refused_naming_the_fix(certs: Certs, tmp_path: Path):
    assert access("tls://127.0.0.1:8786", certs.directory, False).certs == certs
    assert access("tcp://127.0.0.1:8786", None, True) == Access("tcp://127.0.0.1:8786", None)
    with pytest.raises(ClusterError, match=r"plain TCP.*tls://HOST:PORT.*wanbench cluster certs"):
        access("tcp://127.0.0.1:8786", certs.directory, False)
    with pytest.raises(ClusterError, match="needs the cluster's certificates: give --certs"):
        access("tls://127.0.0.1:8786", None, False)
    with pytest.raises(ClusterError, match="holds no ca.pem, node.pem, node.key"):
        access("tls://127.0.0.1:8786", tmp_path, False)


@pytest.mark.parametrize("command", [
    ["load", "--target", "127.0.0.1:9", "--hot-conns", "1", "--rate", "10", "--cluster"],
    ["run", "scenarios/quickstart.yaml", "--cluster"],
    ["worker", "--role", "hot", "--scheduler"],
])
def test_each_command_refuses_a_plain_scheduler_unless_insecure(command, tmp_path: Path):
    address = f"tcp://127.0.0.1:{free_port()}"
    done = wanbench(*command, address, *(["--out", str(tmp_path)] if "run" in command else []))
    assert done.returncode == 2, done.stderr
    assert "plain TCP" in done.stderr and "tls://HOST:PORT" in done.stderr
    assert "wanbench cluster certs" in done.stderr and "--insecure" in done.stderr
    assert "Traceback" not in done.stderr and not any(tmp_path.iterdir())
    if command[0] == "load":  # past the check, nobody answers there
        insecure = wanbench(*command, address, "--insecure")
        assert insecure.returncode == 2 and "did not answer" in insecure.stderr


def test_a_worker_listens_where_it_reaches_the_scheduler_with_the_clusters_certificate(
        certs: Certs):
    args = argparse.Namespace(scheduler="tls://127.0.0.1:8786", role="hot", name=None,
                              host=None, dask_args=[])
    argv = worker_argv(args, access(args.scheduler, certs.directory, False))
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert argv[argv.index("--tls-cert") + 1] == str(certs.directory / "node.pem")
    assert argv[argv.index("--tls-key") + 1] == str(certs.directory / "node.key")
    assert argv[argv.index("--tls-ca-file") + 1] == str(certs.directory / "ca.pem")


@pytest.fixture(scope="module")
def tls_cluster(certs: Certs) -> Iterator[tuple[Access, list[psutil.Process]]]:
    """A TLS scheduler on loopback and one worker started without --host: the access, and
    the scheduler's and worker's dask processes."""
    address = f"tls://127.0.0.1:{free_port()}"
    certificates = ["--certs", str(certs.directory)]
    procs = [subprocess.Popen([*WANBENCH, "cluster", "scheduler", *certificates, "--host",
                               "127.0.0.1", "--port", address.rpartition(":")[2]],
                              stderr=subprocess.DEVNULL)]
    try:
        procs.append(subprocess.Popen([*WANBENCH, "worker", "--scheduler", address, "--role",
                                       "hot", "--name", "tls-hot", *certificates],
                                      stderr=subprocess.DEVNULL))
        with connect_started(Access(address, certs), 30) as client:
            client.wait_for_workers(1, timeout=60)
        # the dask processes each `wanbench` runs (and removes the scratch space of)
        yield Access(address, certs), [child for proc in procs
                                       for child in psutil.Process(proc.pid).children()]
    finally:
        stop_all(procs)


def reaches(address: str, certs: Certs | None) -> bool:
    """Whether a Dask connection to address (a worker's) gets through with these
    certificates (None: plain)."""
    from distributed.comm import connect as open_comm

    arguments = certs.security().get_connection_args("client") if certs else {}

    async def attempt() -> None:
        comm = await open_comm(address, timeout=3, **arguments)
        await comm.close()
    try:
        asyncio.run(attempt())
    except (OSError, TimeoutError):
        return False
    return True


@pytest.mark.slow
def test_only_a_holder_of_the_clusters_certificate_gets_in(tls_cluster, tmp_path: Path):
    good, processes = tls_cluster
    with connect(good) as client:
        (worker_address,) = client.scheduler_info()["workers"]
        assert client.submit(sum, [1, 2]).result(timeout=30) == 3
    assert worker_address.startswith("tls://127.0.0.1:")
    for process in processes:  # the scheduler's and the worker's, their HTTP servers too
        listening = {c.laddr.ip for c in process.net_connections("tcp") if c.status == "LISTEN"}
        assert listening == {"127.0.0.1"}, listening  # not 0.0.0.0
    strangers = write(tmp_path / "another-ca")
    for outsider in (Access(good.address.replace("tls://", "tcp://"), None),
                     Access(good.address, strangers)):
        with pytest.raises(ClusterError, match="did not answer"):
            connect(outsider, timeout_s=3).close()
    assert reaches(worker_address, good.certs)
    assert not reaches(worker_address, strangers)
    assert not reaches(worker_address.replace("tls://", "tcp://"), None)


def test_a_command_reaching_a_live_scheduler_leaves_no_warning_in_its_log(certs: Certs,
                                                                          tmp_path: Path):
    """A look for a listener (a TCP connect without TLS) costs a live scheduler a "TLS
    handshake failed" warning: a command looks only when its Client could not get through."""
    address = f"tls://127.0.0.1:{free_port()}"
    log = tmp_path / "scheduler.log"
    with log.open("wb") as err:
        scheduler = subprocess.Popen(
            [*WANBENCH, "cluster", "scheduler", "--certs", str(certs.directory), "--host",
             "127.0.0.1", "--port", address.rpartition(":")[2]], stderr=err)
    try:
        with connect_started(Access(address, certs), 30):
            pass
        with connect(Access(address, certs)):  # as `wanbench load --cluster` connects
            pass
    finally:
        stop_all([scheduler])
    said = log.read_text()
    assert "Receive client connection" in said  # the log is the scheduler's, and it heard us
    assert "handshake" not in said, said


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_stopped_scheduler_leaves_no_scratch_space(certs: Certs, tmp_path: Path, stop: int):
    """Dask's default scratch space is `dask-scratch-space` in the system temporary directory,
    left with its lock files after the cluster stops; wanbench gives each scheduler and
    worker a directory of its own and removes it."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    address = f"tls://127.0.0.1:{free_port()}"
    scheduler = subprocess.Popen(
        [*WANBENCH, "cluster", "scheduler", "--certs", str(certs.directory), "--host",
         "127.0.0.1", "--port", address.rpartition(":")[2]],
        stderr=subprocess.DEVNULL, env={**os.environ, "TMPDIR": str(temporary)})
    try:
        with connect_started(Access(address, certs), 30):
            pass
        assert list(temporary.iterdir()), "the scheduler's scratch space is under TMPDIR"
        scheduler.send_signal(stop)
        assert scheduler.wait(60) == 0  # dask closes cleanly on the SIGTERM it is passed
    finally:
        stop_all([scheduler])
    assert list(temporary.iterdir()) == []
