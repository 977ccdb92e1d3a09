"""The load-target policy: loopback, and addresses of the benchmarking range 198.18.0.0/15
that a network namespace on this machine holds and the sending namespace reaches through
links to this machine's namespaces only (or, in a cluster run, that one of its hosts holds).

Two rules live here and nowhere else: which hosts load may go to (check_target) and what
a request path may hold (check_request_path). check_url is the last look at a URL a
generator's driver built: it must name a checked target and a checked path, nothing more.
"""

from __future__ import annotations

import ipaddress
import socket
import urllib.parse
from collections.abc import Collection, Iterable
from pathlib import Path

from clients import namespaces

BENCHMARK_NET = ipaddress.ip_network("198.18.0.0/15")
ALLOW_FLAG = "--allow-any-target"
MAX_HOPS = 8  # links from the sending namespace to the holder (a topology's path has one)


class TargetRefused(ValueError):
    pass


def resolve(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        # IPv4 first: the generators and wb-server speak IPv4 only (LoadSpec refuses IPv6)
        info = socket.getaddrinfo(host, None, family=socket.AF_INET, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise TargetRefused(f"target host {host!r} does not resolve: {exc}") from exc
    return ipaddress.ip_address(info[0][4][0])


def check_target(host: str, allow_any: bool = False,
                 cluster_addresses: Collection[str] = (),
                 sender: str | Path | None = None) -> str:
    """Return the target's address, or refuse it. Loopback is allowed; an address of
    198.18.0.0/15 only where a cluster run's host holds it (cluster_addresses: those the run
    checked its hosts hold; they name nothing outside 198.18.0.0/15) or where load sent from
    the sender's network namespace (a path such as /run/netns/NAME; None: this process's
    own) reaches it through links to namespaces on this machine, the last of which holds it.
    Load to any other would follow some namespace's routes, maybe out of the machine.
    Anything else only with allow_any."""
    addr = resolve(host)
    if allow_any or addr.is_loopback:
        return str(addr)
    if addr.version == 4 and addr in BENCHMARK_NET:
        if str(addr) in cluster_addresses:
            return str(addr)
        problem = _path_problem(addr, Path(sender) if sender else namespaces.OWN)
        if problem is None:
            return str(addr)
        raise TargetRefused(
            f"refusing to send load to {host}: {problem}; bring up the topology that holds "
            f"it (wanbench topo up FILE) and send from a host linked to its server, or pass "
            f"{ALLOW_FLAG} if you own {addr} and mean it.")
    raise TargetRefused(
        f"refusing to send load to {host} ({addr}): wanbench only targets loopback "
        f"(127.0.0.0/8, ::1) and addresses of the benchmarking range {BENCHMARK_NET} that its "
        f"namespace topologies hold. If you own {addr} and mean it, pass {ALLOW_FLAG}."
    )


def _path_problem(addr: ipaddress.IPv4Address, sender: Path) -> str | None:
    """Why load from sender would not reach addr through links to this machine's namespaces
    only (None: it would). Each namespace on the way routes addr by a route of its own, not
    its default route, out of a link whose far end is a namespace here holding the route's
    next hop; the walk ends at the namespace that holds addr."""
    machine = namespaces.machine()
    if not any(ns.holds(addr) for ns in machine):
        return (f"no network namespace on this machine holds {addr}, so the load would follow "
                f"this machine's routes, maybe out of it")
    here = next((ns for ns in machine if ns.identity == namespaces.identity(sender)), None)
    if here is None:
        return f"the namespace it would be sent from ({sender}) cannot be read"
    where = f"the sending namespace ({sender})"
    for _ in range(MAX_HOPS):
        if here.holds(addr):
            return None
        route = namespaces.route(here.path, addr)
        if route is None or route.kind != "unicast" or route.device is None:
            how = "has no route to it" if route is None else f"routes it as {route.kind}"
            return f"{where} {how}"
        via = f" via {route.gateway}" if route.gateway else ""
        if route.destination == "default":
            return (f"{where} would send it through its default route ({route.device}{via}), "
                    f"wherever that leads, not through a link to the namespace holding {addr}")
        hop = route.gateway or addr
        device = here.interface(route.device)
        ends = [] if device is None else [
            ns for ns in namespaces.far_ends(here, device, machine) if ns.holds(hop)]
        if not ends:
            return (f"{where} would send it out of {route.device}{via}, which is not a link "
                    f"to a namespace on this machine holding {hop}")
        here = ends[0]
        where = f"namespace {here.path}, where the load would go next,"
    return f"{addr} is more than {MAX_HOPS} links away from {sender}"


def check_request_path(path: str) -> str:
    """Return path if it is an origin-form request path, else raise ValueError naming the fix.

    A path starts with '/' and holds printable ASCII only: no whitespace or control
    characters (they would end the request line or add headers), no '@' (after HOST:PORT in
    a URL it turns the target into user info and names another host) and no '\\' or '"'
    (some URL parsers read '\\' as '/'; wb-sclient refuses both). Non-ASCII characters
    must be percent-encoded, as must any of the refused ones the server should see
    (%40 for '@'). '?' (query), '#' and '%XX' escapes are kept and sent as written.
    """
    if not isinstance(path, str):
        raise ValueError(f"path {path!r} is not a string; fix: give a request path such as /")
    if not path.startswith("/"):
        raise ValueError(f"path {path!r} is not a request path: it must start with '/'; "
                         f"fix: give only the path, e.g. /index.html (the host and port go in "
                         f"the target)")
    for char in path:
        if char in '@\\"' or not 0x21 <= ord(char) <= 0x7E:
            if char == "@":
                what = "'@', which after HOST:PORT in a URL names another host"
            elif ord(char) > 0x7E:
                what = f"the non-ASCII character {char!r}"
            elif ord(char) < 0x21 or ord(char) == 0x7F:
                what = f"whitespace or a control character ({char!r}), which ends the request"
            elif char == "\\":
                what = "'\\', which some URL parsers read as '/'"
            else:
                what = "'\"', which wb-sclient refuses (it would break its JSON result)"
            raise ValueError(f"path {path!r} holds {what}; fix: percent-encode it "
                             f"({_escaped(char)}) if the server should see it")
    return path


def _escaped(char: str) -> str:
    return "".join(f"%{b:02X}" for b in char.encode("utf-8"))


def check_url(url: str, targets: Iterable[tuple[str, int]]) -> str:
    """Return url if it is exactly http://ADDRESS:PORT/PATH for one of the already checked
    targets (address, port) and a valid request path; refuse anything else.

    The defence in depth behind the spec's own checks: whatever built the URL, the host a
    tool will connect to is the one named here."""
    targets = list(targets)
    problem = _url_problem(url, targets)
    if problem:
        raise TargetRefused(f"refusing to run: the generator's URL {url!r} {problem}; the "
                            f"target must be one of "
                            f"{', '.join(_host_port(h, p) for h, p in targets) or '(none)'}")
    return url


def _url_problem(url: str, targets: list[tuple[str, int]]) -> str | None:
    if any(not 0x21 <= ord(c) <= 0x7E for c in url):
        return "holds whitespace, control or non-ASCII characters"
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http":
        return "is not an http:// URL"
    if "@" in parts.netloc or parts.username is not None:
        return "names user info ('@'), which makes its host another one"
    try:
        port = parts.port
    except ValueError:
        return "has no valid port"
    if not parts.hostname or port is None:
        return "names no HOST:PORT"
    if url[len("http://") + len(parts.netloc):] == "":
        return "has no path"
    if (str(resolve(parts.hostname)), port) not in targets:  # checked: the policy holds
        return f"connects to {_host_port(parts.hostname, port)}, which is not the target"
    check_request_path(url[len("http://") + len(parts.netloc):])
    return None


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def url_for(host: str, port: int, path: str) -> str:
    """http://HOST:PORT/PATH with an IPv6 address in brackets."""
    return f"http://{_host_port(host, port)}{check_request_path(path)}"


def split_host_port(target: str) -> tuple[str, int]:
    """Parse HOST:PORT or [V6]:PORT."""
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"target {target!r} is not HOST:PORT (e.g. 127.0.0.1:8080)")
    return host.strip("[]"), int(port)
