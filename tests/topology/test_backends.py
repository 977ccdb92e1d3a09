"""Backend choice: loopback runs without namespaces; netem runs live where the kernel has it."""

from __future__ import annotations

import re

import pytest

from harness.topology import TopologyError, bring_up, load_topology
from harness.topology.backend_probe import choose_backend
from harness.topology.backends import AUTO_ORDER, BACKENDS
from harness.topology.ledger import Ledger
from tests.conftest import REPO, needs_root


def test_loopback_needs_no_namespaces():
    with bring_up(load_topology(REPO / "topologies/loopback.yaml")) as handle:
        assert handle.backend == "none"
        assert handle.address("server") == "127.0.0.1"
        cold = handle.role_hosts("cold")[0]
        assert handle.addresses(cold)[0].startswith("127.0.")
        assert len(handle.addresses(cold)) == 8
        assert handle.exec_prefix(cold) == []
        assert handle.manifest()["backend"] == "none"


def test_loopback_refuses_a_link_backend():
    with pytest.raises(TopologyError, match="loopback topology has no links to emulate"):
        bring_up(load_topology(REPO / "topologies/loopback.yaml"), "netem")


def test_namespaces_refuse_backend_none():
    with pytest.raises(TopologyError, match="backend none is only for loopback"):
        bring_up(load_topology(REPO / "topologies/lan.yaml"), "none")


@needs_root
def test_netem_live_or_skipped_with_reason(no_leftovers, state_dir):
    ledger = Ledger.create("wbprobe" + "0", None, "netem")
    try:
        try:
            choose_backend("netem", load_topology(REPO / "topologies/lan.yaml"), ledger)
        except TopologyError as exc:
            pytest.skip(f"no live netem here: {exc}")
    finally:
        ledger.remove()
    topology = load_topology(REPO / "topologies/lan.yaml", {"links.lan.delay_ms": "25"})
    with bring_up(topology, "netem") as handle:
        no_leftovers.append(handle.prefix)
        assert handle.calibration["lan"]["ping_rtt_median_ms"] == pytest.approx(50, rel=0.01)


def test_veth_backend_refuses_shaped_links():
    topology = load_topology(REPO / "topologies/dumbbell-wan.yaml")
    with pytest.raises(TopologyError, match="backend veth cannot shape; links cold have"):
        choose_backend("veth", topology, None)


@needs_root
def test_veth_backend_live_runs_the_netem_link_commands(no_leftovers):
    """The veth pairs, addresses and routes of the netem plan, live (all but tc here)."""
    with bring_up(load_topology(REPO / "topologies/lan.yaml"), "veth") as handle:
        no_leftovers.append(handle.prefix)
        assert handle.backend == "veth"
        assert handle.calibration["lan"]["connect_rtt_median_ms"] < 0.2


def test_backend_names_are_compared_in_the_table_only():
    """Every module asks harness.topology.backends for what a backend does: no other module
    compares a backend's name with a literal (the seven string comparisons it replaced)."""
    compared = re.compile(r"""backend\w*(["']\])?\s*(==|!=|not in|in)\s*\(?["']""")
    found = [f"{path.relative_to(REPO)}:{n}: {line.strip()}"
             for path in [*(REPO / "harness").rglob("*.py"), *(REPO / "topologies").glob("*.py")]
             if path.name != "backends.py"
             for n, line in enumerate(path.read_text().splitlines(), 1) if compared.search(line)]
    assert not found, found


@pytest.mark.parametrize(("name", "modules", "emulator"), [
    ("netem", ("sch_netem",), None), ("xdp", (), "wb-linkem"), ("userspace", ("tun",), "wb-linkem"),
    ("veth", (), None), ("none", (), None)])
def test_the_table_says_what_each_backend_needs(name: str, modules: tuple, emulator: str | None):
    backend = BACKENDS[name]
    assert (backend.modules, backend.binary) == (modules, emulator)
    assert backend.namespaces == (name != "none") and backend.shapes == (backend in AUTO_ORDER)


def test_auto_tries_netem_then_af_xdp_then_tun_devices():
    assert [b.name for b in AUTO_ORDER] == ["netem", "xdp", "userspace"]
    assert [b.shaped_wiring for b in AUTO_ORDER] == ["netem", "wb-linkem-xdp", "wb-linkem"]
