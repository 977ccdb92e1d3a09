"""A cluster on this one machine: a namespace topology brought up, a scheduler (`wanbench
cluster scheduler`) in its server host's namespace and a `wanbench worker` per host in the
host's own, each taking the host's name as its role, all with certificates of a CA of this
cluster's own. What the cluster tests and the coordination benchmark run on; real machines
hold the same addresses (harness.topology.addressing.host_addresses). Its scheduler and
workers are `wanbench` commands, as on real machines; a run across it is the runner's."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clients.pinning import pin_argv
from harness.cluster.run import entry
from harness.cluster.security import Access, write
from harness.runner.child import ChildRun
from harness.runner.outcome import RunRequest
from harness.topology import bring_up, load_topology
from harness.topology.backends import USERSPACE

WANBENCH = [sys.executable, "-m", "harness.cli"]
SCHEDULER_PORT = 8786
STOP_TIMEOUT_S = 10.0


@dataclass
class NamespaceCluster:
    handle: Any  # the topology's NamespaceHandle
    scheduler: Access  # tls://ADDR:PORT, in the server host's namespace, and the certificates
    # the CPU the cluster's own Python processes (scheduler, workers, run) share, off the
    # generators' (each host of a real cluster has its own); None: any
    cpu: int | None = None
    processes: list[subprocess.Popen] = field(default_factory=list)  # the scheduler first
    workers: dict[str, subprocess.Popen] = field(default_factory=dict)  # host → its worker

    def prefix(self, host: str) -> list[str]:
        """Runs a command of the cluster's own in host's namespace, on the cluster's CPU."""
        return self.handle.exec_prefix(host) + pin_argv(self.cpu)

    def start_worker(self, host: str) -> subprocess.Popen:
        worker = subprocess.Popen(  # listening where it reaches the scheduler from: its host's
            self.prefix(host) + [*WANBENCH, "worker", "--scheduler", self.scheduler.address,
                                 *self.scheduler.options(), "--role", host, "--name", host],
            stderr=subprocess.DEVNULL)
        self.workers[host] = worker
        self.processes.append(worker)
        return worker

    def wait_for_workers(self, count: int, timeout_s: float = 60) -> None:
        certs = self.scheduler.certs
        assert certs is not None  # a namespace cluster speaks TLS
        wait = ("from harness.cluster.coordinator import connect_started\n"
                "from harness.cluster.security import access\n"
                f"with connect_started(access({self.scheduler.address!r}, "
                f"{str(certs.directory)!r}, False), 30) as c: "
                f"c.wait_for_workers({count}, timeout={timeout_s})")
        subprocess.run(self.prefix("server") + [sys.executable, "-c", wait], check=True,
                       timeout=timeout_s + 60)

    def run(self, request: RunRequest) -> ChildRun:
        """The run across the cluster, in a child process in the server host's namespace,
        where the scheduler is reachable; its output captured."""
        return ChildRun(request, self.prefix("server"), entry(self.scheduler), capture=True)

    def running(self, names: tuple[str, ...] = ("wb-sclient", "wb-server")) -> dict[str, list[str]]:
        """Host → the processes of these names running in its namespace."""
        found = {}
        for host in self.handle.hosts:
            pids = subprocess.run(["ip", "netns", "pids", self.handle.netns(host)],
                                  capture_output=True, text=True, check=True).stdout.split()
            found[host] = [comm for comm in map(_comm, pids) if comm in names]
        return found



def stop_all(procs: list[subprocess.Popen]) -> None:
    """Stops a cluster's processes, listed scheduler first: its workers, then the scheduler.
    A stopping worker tells its scheduler it leaves; with the scheduler gone it waits to reach
    it again instead of exiting. Each group is asked (SIGTERM), then killed (SIGKILL) when it
    outlives STOP_TIMEOUT_S."""
    _stop(procs[1:])
    _stop(procs[:1])


def _stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _comm(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


@contextmanager
def namespace_cluster(topology: Path, backend: str = USERSPACE.name,
                      cpu: int | None = None) -> Iterator[NamespaceCluster]:
    """The topology up, its scheduler and a worker per host joined; all of it gone after.
    cpu: where the cluster's own processes run (NamespaceCluster.cpu)."""
    with (bring_up(load_topology(topology), backend, calibrate=False) as handle,
          tempfile.TemporaryDirectory(prefix="wanbench-cluster-") as scratch):
        at = handle.address("server")
        certs = write(Path(scratch) / "certs")
        cluster = NamespaceCluster(handle, Access(f"tls://{at}:{SCHEDULER_PORT}", certs), cpu)
        cluster.processes.append(subprocess.Popen(
            cluster.prefix("server") + [*WANBENCH, "cluster", "scheduler", "--certs",
                                        str(certs.directory), "--host", at, "--port",
                                        str(SCHEDULER_PORT)],
            stderr=subprocess.DEVNULL))
        try:
            for host in handle.hosts:
                cluster.start_worker(host)
            cluster.wait_for_workers(len(handle.hosts))
            yield cluster
        finally:
            stop_all(cluster.processes)
