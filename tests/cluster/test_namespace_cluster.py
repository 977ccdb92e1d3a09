"""The cluster across network namespaces: scheduler and wb-server in the server's namespace,
one hot worker in each client namespace (one across the dumbbell's 100 ms WAN link), all on
198.18.0.0/15, the load run from the server's namespace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cluster.namespaces import stop_all
from harness.cluster.security import Certs
from harness.topology import bring_up, load_topology
from tests.conftest import REPO, build, needs_root

pytest.importorskip("distributed", reason="the cluster extra is not installed")
DUMBBELL = REPO / "topologies/dumbbell-wan.yaml"
WANBENCH = [sys.executable, "-m", "harness.cli"]
SCHEDULER_PORT, SERVER_PORT = 8786, 8080


@needs_root
@pytest.mark.slow
def test_a_load_split_over_namespace_hosts_adds_up(tmp_path: Path, certs: Certs):
    build("build/bin/wb-sclient")
    server_bin = build("build/bin/wb-server")
    certificates = ["--certs", str(certs.directory)]
    with bring_up(load_topology(DUMBBELL), "userspace", calibrate=False) as handle:
        at = handle.address("server")
        scheduler = f"tls://{at}:{SCHEDULER_PORT}"
        procs = []
        try:
            procs.append(subprocess.Popen(
                handle.exec_prefix("server") + [*WANBENCH, "cluster", "scheduler", *certificates,
                                                "--host", at, "--port", str(SCHEDULER_PORT)],
                stderr=subprocess.DEVNULL))
            procs.append(subprocess.Popen(
                handle.exec_prefix("server") + [str(server_bin), "--dispatch", "epoll",
                                                "--accept", "multi", "--reply-bytes", "92",
                                                "--listen", f"{at}:{SERVER_PORT}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            for host in ("hot", "cold"):
                procs.append(subprocess.Popen(
                    handle.exec_prefix(host) + [*WANBENCH, "worker", "--scheduler", scheduler,
                                                *certificates, "--role", "hot", "--name", host],
                    stderr=subprocess.DEVNULL))
            result = tmp_path / "merged.json"
            wait = ("from harness.cluster.coordinator import connect_started\n"
                    "from harness.cluster.security import access\n"
                    f"with connect_started(access({scheduler!r}, {str(certs.directory)!r}, False), "
                    "30) as c: c.wait_for_workers(2, timeout=60)")
            subprocess.run(handle.exec_prefix("server") + [sys.executable, "-c", wait],
                           check=True, timeout=120)
            done = subprocess.run(
                handle.exec_prefix("server") + [
                    *WANBENCH, "load", "--cluster", scheduler, *certificates,
                    "--target", f"{at}:{SERVER_PORT}",
                    "--hot-conns", "4", "--rate", "200", "--duration", "2", "--warmup", "0.5",
                    "--json", str(result)], capture_output=True, text=True, timeout=120)
            assert done.returncode in (0, 1), done.stderr
            merged = json.loads(result.read_text())
            assert merged["shards"] == 2
            assert merged["offered_rate_rps"] == 200  # 100 from each host
            assert merged["latency"]["uncorrected"]["count"] > 0, merged["invalid_reasons"]
            assert "cold: clock" in done.stdout and "hot: clock" in done.stdout
        finally:
            stop_all(procs)
