"""Topology test fixtures: a private ledger directory, the emulator built, nothing left over."""

from __future__ import annotations

import subprocess

import pytest

from harness.topology.backends import probe_xdp
from harness.topology.ledger import Ledger
from harness.topology.netns import names as netns_names
from tests.conftest import build
from tests.topology.leftovers import emulator_pids


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    """Ledgers of this test only, so `clean` here never sees another user's topologies."""
    directory = tmp_path / "state"
    monkeypatch.setenv("WANBENCH_TOPO_STATE", str(directory))
    return directory


@pytest.fixture
def linkem():
    return build("build/bin/wb-linkem")


@pytest.fixture
def no_leftovers(state_dir, linkem):
    """Fails the test if its runs left namespaces or emulators, after removing them anyway."""
    prefixes: list[str] = []
    yield prefixes
    leftovers = []
    for prefix in prefixes:
        for pid in emulator_pids(prefix):
            leftovers.append(f"process {pid}")
            subprocess.run(["kill", "-9", str(pid)])
        for ns in netns_names():
            if ns.startswith(prefix + "-"):
                leftovers.append(f"netns {ns}")
                subprocess.run(["ip", "netns", "delete", ns])
    for ledger in Ledger.load_all(state_dir):
        leftovers.append(f"ledger {ledger.path.name}")
    assert not leftovers, f"left behind: {leftovers}"


@pytest.fixture
def af_xdp(state_dir, linkem) -> None:
    """Skips (saying why) where this machine cannot run wb-linkem's AF_XDP path at all."""
    ledger = Ledger.create("wbxdpt0", None, "probe")
    try:
        result = probe_xdp(ledger)
    finally:
        ledger.remove()
    if not result["ok"]:
        pytest.skip(f"AF_XDP on veth unavailable here: {result['error']}")
