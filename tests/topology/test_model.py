"""Topology files: shipped ones load, overrides apply, bad input gets errors naming the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.topology import TopologyError, load_topology
from harness.topology.addressing import check_prefix, plan_addresses
from harness.topology.backends import BACKENDS
from tests.conftest import REPO

SHIPPED = sorted((REPO / "topologies").glob("*.yaml"))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "t.yaml"
    path.write_text(text)
    return path


def test_shipped_topologies_include_the_three_required():
    assert {"loopback.yaml", "lan.yaml", "dumbbell-wan.yaml"} <= {p.name for p in SHIPPED}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_topologies_load_and_have_a_server(path):
    topology = load_topology(path)
    assert topology.role_hosts("server")


def test_dumbbell_puts_hot_and_cold_on_different_links():
    topology = load_topology(REPO / "topologies/dumbbell-wan.yaml")
    hot, cold = topology.role_hosts("hot"), topology.role_hosts("cold")
    link_of = {end: name for name, link in topology.links.items() for end in (link.a, link.b)
               if topology.hosts[end].role != "server"}
    assert link_of[hot[0]] != link_of[cold[0]]
    assert topology.links[link_of[cold[0]]].rtt_ms() == 100
    assert topology.links[link_of[hot[0]]].rtt_ms() == 0


def test_each_load_goes_to_its_own_client_hosts_or_to_the_only_ones():
    dumbbell = load_topology(REPO / "topologies/dumbbell-wan.yaml")
    assert dumbbell.client_hosts("hot") == dumbbell.role_hosts("hot") != []
    assert dumbbell.client_hosts("cold") == dumbbell.role_hosts("cold") != []
    assert dumbbell.client_hosts("hot") != dumbbell.client_hosts("cold")
    lan = load_topology(REPO / "topologies/lan.yaml")  # one client host, role hot
    assert lan.role_hosts("cold") == []
    assert lan.client_hosts("cold") == lan.client_hosts("hot") == ["client"]


def test_override_sets_both_directions_and_one_direction():
    path = REPO / "topologies/dumbbell-wan.yaml"
    topology = load_topology(path, {"links.cold.delay_ms": "10",
                                    "links.cold.b_to_a.delay_ms": "30"})
    cold = topology.links["cold"]
    assert cold.direction("a_to_b").delay_ms == 10
    assert cold.direction("b_to_a").delay_ms == 30
    assert cold.rtt_ms() == 40


@pytest.mark.parametrize("key,value,named", [
    ("links.colt.delay_ms", "5", "no 'colt' under links; known: cold, hot"),
    ("links.cold.delay", "5", "links.cold.delay"),
    ("links.cold.delay_ms", "fast", "links.cold.delay_ms"),
    ("links.cold.loss_pct", "150", "links.cold.loss_pct"),
])
def test_bad_override_names_key_and_value(key, value, named):
    with pytest.raises(TopologyError) as err:
        load_topology(REPO / "topologies/dumbbell-wan.yaml", {key: value})
    assert named in str(err.value)


def test_address_outside_benchmark_range_is_refused(tmp_path):
    path = write(tmp_path, """
name: bad
hosts: {s: {role: server, address: 10.0.0.1}, c: {role: hot}}
links: {l: {a: c, b: s}}
""")
    with pytest.raises(TopologyError, match=r"hosts.s.address: 10.0.0.1 is outside 198.18.0.0/15"):
        load_topology(path)


def test_link_subnet_outside_range_is_refused(tmp_path):
    path = write(tmp_path, """
name: bad
hosts: {s: {role: server}, c: {role: hot}}
links: {l: {a: c, b: s, subnet: 192.168.1.0/24}}
""")
    with pytest.raises(TopologyError, match="links.l.subnet: 192.168.1.0/24 is outside"):
        load_topology(path)


def test_unknown_host_and_unlinked_host_are_refused(tmp_path):
    with pytest.raises(TopologyError, match="unknown host 'x'"):
        load_topology(write(tmp_path, "name: b\nhosts: {s: {role: server}}\n"
                                      "links: {l: {a: x, b: s}}\n"))
    with pytest.raises(TopologyError, match="host 'c' is on no link"):
        load_topology(write(tmp_path, "name: b\nhosts: {s: {role: server}, c: {role: hot}, "
                                      "d: {role: cold}}\nlinks: {l: {a: d, b: s}}\n"))


def test_loopback_with_links_is_refused(tmp_path):
    with pytest.raises(TopologyError, match="loopback topology has no links"):
        load_topology(write(tmp_path, "name: b\nloopback: true\nhosts: {s: {role: server}, "
                                      "c: {role: hot}}\nlinks: {l: {a: c, b: s}}\n"))


def test_unreadable_file_is_named(tmp_path):
    with pytest.raises(TopologyError, match="cannot read topology .*missing.yaml"):
        load_topology(tmp_path / "missing.yaml")


def test_queue_limit_is_bdp_times_one_and_a_half():
    topology = load_topology(REPO / "topologies/dumbbell-wan.yaml",
                             {"links.cold.rate_mbit": "1000"})
    cold = topology.links["cold"].direction("a_to_b")
    # 1 Gbit/s x 100 ms = 12.5 MB = 8333.3 packets of 1500 B; x1.5 = 12500.
    assert cold.limit_packets(100) == 12500
    assert cold.limit_packets(0) == 1000  # the floor, far from nothing
    explicit = load_topology(REPO / "topologies/dumbbell-wan.yaml",
                             {"links.cold.queue_limit": "77"}).links["cold"]
    assert explicit.direction("b_to_a").limit_packets(100) == 77


def test_addresses_all_in_benchmark_range_and_distinct():
    for path in SHIPPED:
        topology = load_topology(path)
        if topology.loopback:
            continue
        plan = plan_addresses(topology, "wbt1")
        seen = [a for h in plan.hosts.values() for a in h.addresses]
        seen += [a for lk in plan.links for a in (lk.a_addr, lk.b_addr)]
        assert len(seen) == len(set(seen))
        assert all(a.startswith(("198.18.", "198.19.")) for a in seen)


# "wbab\n": `match` with `$` let a trailing newline through
@pytest.mark.parametrize("prefix", ["xx12", "wb", "wbTOOLONGNAME", "wb-1", "wbab\n", "xwbab"])
def test_bad_prefix_is_refused(prefix):
    with pytest.raises(TopologyError, match="run prefix"):
        check_prefix(prefix)


@pytest.mark.parametrize("overrides,backend,wiring", [
    ({}, "userspace", "veth"),
    ({"links.lan.delay_ms": "5"}, "userspace", "wb-linkem"),
    ({"links.lan.b_to_a.loss_pct": "1"}, "userspace", "wb-linkem"),
    ({"links.lan.queue_limit": "50"}, "userspace", "wb-linkem"),
    ({"links.lan.emulate_unshaped": "true"}, "userspace", "wb-linkem"),
    ({}, "xdp", "veth"),
    ({"links.lan.delay_ms": "5"}, "xdp", "wb-linkem-xdp"),
    ({"links.lan.emulate_unshaped": "true"}, "xdp", "wb-linkem-xdp"),
    ({}, "netem", "veth"),
    ({"links.lan.delay_ms": "5"}, "netem", "netem"),
    ({"links.lan.emulate_unshaped": "true"}, "netem", "veth"),
    ({}, "veth", "veth"),
], ids=lambda v: str(v))
def test_link_wiring_follows_shaping_and_backend(overrides, backend, wiring):
    link = load_topology(REPO / "topologies/lan.yaml", overrides).links["lan"]
    assert BACKENDS[backend].wiring(link) == wiring


SHAPED = """name: b
hosts: {s: {role: server}, c: {role: hot}}
links:
  l:
    a: c
    b: s
    delay_ms: 5
"""


def test_topology_errors_name_their_file_and_line(tmp_path):
    """Before: `{path}: links.l.delay_ms: ...`, no line; the scenario loader gave lines."""
    assert load_topology(write(tmp_path, SHAPED)).links["l"].delay_ms == 5
    path = write(tmp_path, SHAPED.replace("delay_ms: 5", "delay_ms: -5"))
    with pytest.raises(TopologyError, match=rf"^{path}:7: links.l.delay_ms: must be "
                                            r"at least 0 \(got -5\)$"):
        load_topology(path)
    path = write(tmp_path, SHAPED.replace("delay_ms: 5", "delay_ms: 5\n    delay_ms: 6"))
    with pytest.raises(TopologyError, match=rf"^{path}:8: key 'delay_ms' appears twice"):
        load_topology(path)


def test_an_override_error_names_the_override_and_a_typo_its_nearest_field():
    with pytest.raises(TopologyError, match=r"^--set 'links.cold.delay_ms=fast': "
                                            r"links.cold.delay_ms: wants a number"):
        load_topology(REPO / "topologies/dumbbell-wan.yaml", {"links.cold.delay_ms": "fast"},
                      origin="--set")
    with pytest.raises(TopologyError, match=r"links.cold.delay: unknown field; .*did you mean "
                                            r"delay_ms\?"):
        load_topology(REPO / "topologies/dumbbell-wan.yaml", {"links.cold.delay": "5"})


def test_where_a_topology_was_read_from_is_recorded_not_read_from_it(tmp_path):
    path = write(tmp_path, SHAPED)
    assert load_topology(path).source_file == str(path)
    with pytest.raises(TopologyError, match="source_file: unknown field"):
        load_topology(write(tmp_path, SHAPED + "source_file: /elsewhere\n"))
