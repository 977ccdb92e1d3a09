"""The target rule cannot be bypassed through the request path: `path` is validated once
(LoadSpec and the scenario model share one function) and every generator's final argv/URL
is checked again before it runs."""

from __future__ import annotations

import select
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

import clients
from clients import LoadSpec
from clients.spec import GENERATORS
from clients.targets import TargetRefused
from tests.conftest import REPO, free_port

# Load for 127.0.0.1:P with this path went to 127.0.0.2:Q through wrk's URL (userinfo '@').
DIVERTING = "@127.0.0.2:{port}/"
RATE = {"sclient": "10", "asyncio": "10", "httperf": "10", "wrk": None, "wrk2": "10"}


@pytest.fixture
def decoy() -> Iterator[socket.socket]:
    """A listener on another loopback address: the diverted load would arrive here."""
    sock = socket.socket()
    sock.bind(("127.0.0.2", 0))
    sock.listen(64)
    yield sock
    sock.close()


def connected(sock: socket.socket) -> bool:
    """Whether anything connected to the listener (a pending accept makes it readable)."""
    return bool(select.select([sock], [], [], 0.2)[0])


def wanbench_load(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", "load", *args],
                          capture_output=True, text=True, timeout=60, cwd=REPO)


def assert_path_refused(done: subprocess.CompletedProcess, path: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert f"{path!r}" in done.stderr and "must start with '/'" in done.stderr
    assert "fix:" in done.stderr


@pytest.mark.parametrize("generator", GENERATORS)
def test_load_refuses_a_path_that_names_another_host(generator, decoy, sclient):
    path = DIVERTING.format(port=decoy.getsockname()[1])
    args = ["--generator", generator, "--target", f"127.0.0.1:{free_port()}",
            "--hot-conns", "1", "--duration", "1", "--warmup", "0", "--path", path]
    if RATE[generator]:
        args += ["--rate", RATE[generator]]
    assert_path_refused(wanbench_load(*args), path)
    assert not connected(decoy), f"{generator} sent load to 127.0.0.2"


@pytest.mark.parametrize("generator", GENERATORS)
def test_scenario_refuses_a_hot_path_that_names_another_host(generator, decoy, tmp_path):
    path = DIVERTING.format(port=decoy.getsockname()[1])
    rate = f", rate_rps: {RATE[generator]}" if RATE[generator] else ""
    scenario = tmp_path / "diverted.yaml"
    scenario.write_text("name: diverted\nwarmup_s: 0\nduration_s: 0.2\n"
                        f"hot: {{generator: {generator}, conns: 1{rate},\n"
                        f"      path: '{path}'}}\n")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(scenario),
                           "--out", str(out)], capture_output=True, text=True, timeout=120,
                          cwd=REPO)
    assert_path_refused(done, path)
    assert f"{scenario}:5: hot.path:" in done.stderr
    assert not out.exists() or not any(out.iterdir())
    assert not connected(decoy), f"{generator} sent load to 127.0.0.2"


def test_a_swept_hot_path_is_checked_too():
    from harness.scenario import ScenarioError, parse

    with pytest.raises(ScenarioError, match=r"hot.path: path '@127.0.0.2:9/'"):
        parse("name: swept\nsweep:\n  hot.path: ['/', '@127.0.0.2:9/']\n")


@pytest.mark.parametrize("path", [
    "@127.0.0.2:9/", "", "index.html", "/a@b", "/a b", "/a\tb", "/a\r\nHost: evil", "/a\\b",
    "/caf\u00e9", '/a"b', "/a\x00b", "/a\x7f",
])
def test_spec_refuses_bad_paths(path):
    with pytest.raises(ValueError, match="path"):
        LoadSpec(generator="wrk", targets=["127.0.0.1:8080"], hot_conns=1, path=path)


@pytest.mark.parametrize("path", ["/", "/index.html", "/q?a=1&b=%40x", "/a#frag", "//x/y",
                                  "/~user/;p=1"])
def test_spec_keeps_good_paths(path):
    assert LoadSpec(generator="wrk", targets=["127.0.0.1:8080"], hot_conns=1,
                    path=path).path == path


def _spec(generator: str, **kw) -> LoadSpec:
    rate = RATE[generator]
    return LoadSpec(generator=generator, targets=kw.pop("targets", ["127.0.0.1:8080"]),
                    hot_conns=1, rate_rps=float(rate) if rate else None, **kw)


@pytest.fixture
def any_tool(monkeypatch):
    """Build commands for tools that are not installed (wrk2): the argv is what is tested."""
    from clients.drivers import httperf, wrk

    for module in (httperf, wrk):
        monkeypatch.setattr(module, "tool_path", lambda name: f"/usr/bin/{name}")


@pytest.mark.parametrize("generator", GENERATORS)
def test_every_command_is_checked_after_it_is_built(generator, any_tool, sclient):
    """A spec changed after validation (or a future construction bug) still cannot send
    load elsewhere: the final argv is checked, not only the spec's fields."""
    spec = _spec(generator)
    assert clients.command(spec)  # a sound spec builds
    spec.path = "@127.0.0.2:9/"
    with pytest.raises(ValueError, match="must start with '/'"):
        clients.command(spec)


@pytest.mark.parametrize("generator", ["wrk", "wrk2"])
def test_a_built_url_pointing_elsewhere_is_refused(generator, any_tool, monkeypatch):
    from clients.drivers import wrk, wrk2
    from clients.targets import TargetRefused

    for bad in ("http://127.0.0.1:8080@127.0.0.2:9/", "http://127.0.0.2:9/",
                "http://192.0.2.1:8080/", "https://127.0.0.1:8080/", "http://127.0.0.1:8080/\n"):
        for module in (wrk, wrk2):
            monkeypatch.setattr(module, "url", lambda spec, bad=bad: bad)
        with pytest.raises(TargetRefused):
            clients.command(_spec(generator))


def test_httperf_built_destination_is_checked(any_tool):
    from clients.drivers.common import check_command
    from clients.targets import TargetRefused

    spec = _spec("httperf")
    argv = clients.command(spec)
    check_command(spec, argv)
    for good, bad in (("--server=127.0.0.1", "--server=127.0.0.2"), ("--port=8080", "--port=9"),
                      ("--uri=/", "--uri=@127.0.0.2:9/")):
        with pytest.raises(ValueError):
            check_command(spec, [bad if a == good else a for a in argv])
    with pytest.raises(TargetRefused, match="would connect to [?]:8080"):
        check_command(spec, [a for a in argv if not a.startswith("--server=")])
    with pytest.raises(TargetRefused, match="no destination"):
        check_command(spec, [a for a in argv if not a.startswith(("--server=", "--port="))])


def test_wrk_url_brackets_ipv6(any_tool):
    argv = clients.command(_spec("wrk", targets=["[::1]:8080"]))
    assert argv[-1] == "http://[::1]:8080/"


def test_asyncgen_refuses_a_bad_path_itself():
    done = subprocess.run([sys.executable, "-m", "clients.asyncgen", "--target", "127.0.0.1:9",
                           "--hot-conns", "1", "--duration", "1", "--path", "@127.0.0.2:9/"],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 2 and "must start with '/'" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("generator", ["sclient", "httperf"])
def test_an_ipv6_target_of_an_ipv4_only_tool_is_one_line_naming_the_fix(generator):
    spec = _spec(generator, targets=["[::1]:8080"])
    with pytest.raises(TargetRefused, match=r"\[::1\]:8080: ::1 is IPv6 and .* IPv4 only; "
                                            r"fix: .*127\.0\.0\.1:8080 or localhost:8080"):
        spec.resolved_targets()


def test_an_ipv6_target_of_wrk_and_a_name_of_loopback_are_taken():
    assert _spec("wrk", targets=["[::1]:8080"]).resolved_targets() == [("::1", 8080)]
    assert _spec("sclient", targets=["localhost:8080"]).resolved_targets() == \
        [("127.0.0.1", 8080)]


def test_load_refuses_an_ipv6_target_in_one_line_not_a_usage_dump():
    done = subprocess.run([sys.executable, "-m", "harness.cli", "load", "--target", "[::1]:9",
                           "--hot-conns", "1", "--rate", "10", "--duration", "1"],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "IPv6" in done.stderr and "usage" not in done.stderr
