"""Run inside a guest by test_ktrace_functions: wb-ktrace's probe, then two windows of known
workloads (SELECTS select calls over 1,000 idle descriptors, and in the same window
OUTSIDE_SELECTS of a process outside the measured tree; ROUND_TRIPS loopback TCP round trips),
what was loaded during the first and what is left after both; as JSON into argv[1]."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from harness.metrics.ktrace import loaded_objects
from tests.ktrace.conftest import Loader, Workload, gone_within

REPO = Path(__file__).resolve().parents[2]
LOADER = REPO / "build/bin/wb-ktrace"
SELECTS = 200
OUTSIDE_SELECTS = 300
ROUND_TRIPS = 200


def window(kind: str, fds: int, calls: int, outsider: Workload | None = None
           ) -> tuple[dict, list[str], str]:
    """The document of one workload's window (the outsider's calls made in it too, if any),
    what bpftool listed inside it, the loader's stderr."""
    workload = Workload(kind, fds, calls)
    loader = Loader(LOADER, "--pid", str(workload.pid))
    try:
        loader.start()
        held = loaded_objects()
        if outsider is not None:
            outsider.run()
        workload.run()
        document = loader.stop()
        assert loader.proc.stderr is not None
        return document, held, loader.proc.stderr.read()
    finally:
        loader.close()
        workload.close()


def main(out: Path) -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    probe = subprocess.run([str(LOADER), "--probe"], capture_output=True, text=True, check=True)
    outsider = Workload("select", 10, OUTSIDE_SELECTS)
    try:
        select_document, held, said = window("select", 1000, SELECTS, outsider)
    finally:
        outsider.close()
    tcp_document, _, _ = window("tcp", 0, ROUND_TRIPS)
    out.write_text(json.dumps({
        "probe": json.loads(probe.stdout), "select": select_document, "tcp": tcp_document,
        "held": held, "loader_said": said, "left": gone_within(10),
        "selects": SELECTS, "round_trips": ROUND_TRIPS,
    }, indent=1))
