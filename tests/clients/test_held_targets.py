"""198.18.0.0/15 is a load target only where a network namespace on this machine holds the
address and the sending namespace reaches it through links to this machine's namespaces: an
address nobody here holds, or one held by a namespace the sender reaches only through its
default route, would follow routes out of the machine.

The refusals run `wanbench load` inside a fresh network namespace: with only `lo` up, so that
even a bug that let the load through would have no route to send it on, or with a default
route into a sink namespace that counts every packet reaching it."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest

from clients.namespaces import NAMED
from clients.spec import GENERATORS
from clients.targets import TargetRefused, check_target
from tests.conftest import REPO, build, free_port, needs_root

UNHELD = "198.18.0.1"  # no wanbench plan hands it out (link subnets start at 198.18.1.0/24)
# held by namespaces the sender has no link to: a named one and an unnamed one (unshare)
HELD_ELSEWHERE, HELD_UNNAMED = "198.18.77.1", "198.18.77.2"
# A veth pair between two test namespaces: the client's end and the server's
CLIENT_END, SERVER_END, PREFIXLEN = "198.18.0.5", "198.18.0.6", 30
RATE = {"sclient": "20", "asyncio": "20", "httperf": "20", "wrk": None, "wrk2": "20"}


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def netns_name() -> str:
    # not wb…: a test's namespace is no run's, and no `topo clean` should take it for one
    return f"tnet-{secrets.token_hex(3)}"


@pytest.fixture
def bare_netns() -> Iterator[str]:
    """A fresh network namespace with only `lo` up: no route anywhere else."""
    name = netns_name()
    ip("netns", "add", name)
    try:
        ip("-n", name, "link", "set", "lo", "up")
        yield name
    finally:
        ip("netns", "del", name)


@pytest.fixture
def veth_pair() -> Iterator[tuple[str, str]]:
    """Two namespaces joined by a veth pair, CLIENT_END in the first, SERVER_END in the
    second: (client namespace, server namespace)."""
    client, server = netns_name(), netns_name()
    ip("netns", "add", client)
    try:
        ip("netns", "add", server)
        try:
            ip("-n", client, "link", "add", "c0", "type", "veth", "peer", "name", "s0",
               "netns", server)
            for ns, dev, address in ((client, "c0", CLIENT_END), (server, "s0", SERVER_END)):
                ip("-n", ns, "addr", "add", f"{address}/{PREFIXLEN}", "dev", dev)
                ip("-n", ns, "link", "set", dev, "up")
                ip("-n", ns, "link", "set", "lo", "up")
            yield client, server
        finally:
            ip("netns", "del", server)
    finally:
        ip("netns", "del", client)


def load_in(netns: str, generator: str, target: str, duration_s: str = "1"
            ) -> subprocess.CompletedProcess:
    args = ["--generator", generator, "--target", target, "--hot-conns", "1", "--duration",
            duration_s, "--warmup", "0"]
    if RATE[generator]:
        args += ["--rate", RATE[generator]]
    return subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-m", "harness.cli",
                           "load", *args], capture_output=True, text=True, timeout=120, cwd=REPO)


@needs_root
@pytest.mark.parametrize("generator", GENERATORS)
def test_load_refuses_a_benchmark_address_no_namespace_holds(generator, bare_netns, sclient):
    done = load_in(bare_netns, generator, f"{UNHELD}:18080")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert f"no network namespace on this machine holds {UNHELD}" in done.stderr, done.stderr
    assert "--allow-any-target" in done.stderr


@needs_root
@pytest.mark.parametrize("generator", GENERATORS)
def test_load_goes_to_an_address_another_namespace_holds(generator, veth_pair, sclient):
    if generator in ("wrk", "wrk2", "httperf") and shutil.which(generator) is None:
        pytest.skip(f"{generator} is not on PATH")
    client, server = veth_pair
    port = free_port()
    wb_server = subprocess.Popen(
        ["ip", "netns", "exec", server, str(build("build/bin/wb-server")), "--dispatch", "epoll",
         "--accept", "multi", "--listen", f"{SERVER_END}:{port}"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert wb_server.stdout is not None and wb_server.stdout.readline().startswith("ready")
        done = load_in(client, generator, f"{SERVER_END}:{port}")
        assert done.returncode in (0, 1), done.stderr  # 1: invalid on a busy machine
        assert "replies" in done.stdout and "errors" in done.stdout
    finally:
        wb_server.terminate()
        wb_server.wait()


@needs_root
def test_the_rule_follows_the_namespace_that_holds_the_address(veth_pair):
    """Held by the namespace at the other end of the sender's link, then by none."""
    sender = NAMED / veth_pair[0]
    assert check_target(SERVER_END, sender=sender) == SERVER_END
    assert check_target(CLIENT_END, sender=sender) == CLIENT_END  # the sender's own
    ip("netns", "del", veth_pair[1])
    ip("netns", "add", veth_pair[1])  # for the fixture to delete
    with pytest.raises(TargetRefused, match=f"no network namespace on this machine holds "
                                            f"{SERVER_END}"):
        check_target(SERVER_END, sender=sender)


@needs_root
def test_an_address_held_here_is_refused_where_the_sender_has_no_link_to_it(veth_pair):
    """This test's own namespace holds no link to the pair: it would reach SERVER_END, if at
    all, through its default route."""
    with pytest.raises(TargetRefused, match="default route|no route"):
        check_target(SERVER_END)


@pytest.fixture
def behind_a_sink() -> Iterator[tuple[str, str]]:
    """A namespace whose only link, and default route, lead to a sink namespace; with an
    unrelated named namespace holding HELD_ELSEWHERE and an unnamed one (unshare) holding
    HELD_UNNAMED. Yields (sending namespace, sink namespace)."""
    sender, sink, holder = netns_name(), netns_name(), netns_name()
    made = []
    unnamed = None
    try:
        for ns in (sender, sink, holder):
            ip("netns", "add", ns)
            made.append(ns)
            sysctl(ns, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
            ip("-n", ns, "link", "set", "lo", "up")
        ip("-n", sender, "link", "add", "out0", "type", "veth", "peer", "name", "sink0",
           "netns", sink)
        for ns, dev, address in ((sender, "out0", "192.0.2.2"), (sink, "sink0", "192.0.2.1")):
            ip("-n", ns, "addr", "add", f"{address}/24", "dev", dev)
            ip("-n", ns, "link", "set", dev, "up")
        ip("-n", sender, "route", "add", "default", "via", "192.0.2.1")
        ip("-n", holder, "addr", "add", f"{HELD_ELSEWHERE}/32", "dev", "lo")
        unnamed = subprocess.Popen(
            ["unshare", "-n", "sh", "-c", f"ip link set lo up && ip addr add {HELD_UNNAMED}/32 "
                                          f"dev lo && echo up && exec sleep 600"],
            stdout=subprocess.PIPE, text=True)
        assert unnamed.stdout is not None and unnamed.stdout.readline().strip() == "up"
        yield sender, sink
    finally:
        if unnamed is not None:
            unnamed.kill()
            unnamed.wait()
        for ns in made:
            ip("netns", "del", ns)


def sysctl(netns: str, *settings: str) -> None:
    subprocess.run(["ip", "netns", "exec", netns, "sysctl", "-qw", *settings], check=True,
                   capture_output=True)


def packets_at(netns: str, dev: str) -> int:
    stats = json.loads(subprocess.run(["ip", "-n", netns, "-j", "-s", "link", "show", dev],
                                      check=True, capture_output=True, text=True).stdout)
    return stats[0]["stats64"]["rx"]["packets"]


@needs_root
@pytest.mark.parametrize("generator", GENERATORS)
@pytest.mark.parametrize("address", [HELD_ELSEWHERE, HELD_UNNAMED])
def test_no_load_leaves_through_the_senders_default_route(generator, address, behind_a_sink,
                                                          sclient):
    """Held by a namespace on this machine that the sender reaches only through its default
    route: refused before any packet, and nothing reaches the sink."""
    sender, sink = behind_a_sink
    before = packets_at(sink, "sink0")
    done = load_in(sender, generator, f"{address}:80")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "default route" in done.stderr and "--allow-any-target" in done.stderr
    assert packets_at(sink, "sink0") == before


def test_the_run_vouches_only_for_the_benchmarking_range():
    """A cluster run's checked hosts (cluster_addresses) stand for 198.18.0.0/15 addresses
    held on another machine; they never widen the rule beyond that range."""
    assert check_target(UNHELD, cluster_addresses=(UNHELD,)) == UNHELD
    with pytest.raises(TargetRefused, match="no network namespace"):
        check_target(UNHELD, cluster_addresses=("198.18.0.2",))
    with pytest.raises(TargetRefused, match="only targets loopback"):
        check_target("192.0.2.1", cluster_addresses=("192.0.2.1",))


def test_loopback_and_the_override_need_no_namespace():
    assert check_target("127.0.0.1") == "127.0.0.1"
    assert check_target(UNHELD, allow_any=True) == UNHELD
    assert check_target("192.0.2.1", allow_any=True) == "192.0.2.1"

