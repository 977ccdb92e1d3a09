"""Shared by the external-tool drivers: argv prefix, unsupported options, unit parsing."""

from __future__ import annotations

import re
import shutil

from clients.pinning import pin_argv
from clients.spec import LoadSpec
from clients.targets import TargetRefused, check_request_path, check_url, resolve

# How to get each external tool: the one place the CLI, the run's preflight and doctor ask.
# wrk2 has no Debian package; its build names its binary wrk, which would shadow wrk's.
INSTALL_FIX = {
    "httperf": "apt-get install httperf (scripts/setup-system.sh does)",
    "wrk": "apt-get install wrk (scripts/setup-system.sh does)",
    "wrk2": "wrk2 is not packaged: git clone https://github.com/giltene/wrk2 && make -C wrk2 "
            "(needs libssl-dev, zlib1g-dev), then install its binary, named wrk, as wrk2: "
            "install -m755 wrk2/wrk /usr/local/bin/wrk2",
}

_TIME_UNITS = {"us": 1.0, "ms": 1e3, "s": 1e6, "m": 60e6, "h": 3600e6}


class Unsupported(ValueError):
    """The tool cannot do what the spec asks; the message names an alternative."""


def tool_path(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise FileNotFoundError(f"{name} is not on PATH; fix: {INSTALL_FIX[name]}; or choose "
                                f"--generator sclient")
    return path


def prefix(spec: LoadSpec) -> list[str]:
    """Pin the tool with taskset when the spec names a CPU (it has no option of its own)."""
    return pin_argv(spec.cpu)


def check_command(spec: LoadSpec, argv: list[str]) -> list[str]:
    """The last look at a tool's argv before it runs, whatever built it: every URL in it
    (wrk, wrk2) and httperf's --server/--port/--uri must name one of the spec's checked
    targets and a valid request path. Refuses an argv that names no destination at all."""
    targets = spec.resolved_targets()
    found = 0
    options = dict(a.split("=", 1) for a in argv if a.startswith("--") and "=" in a)
    for arg in argv:
        if "://" in arg:
            check_url(arg, targets)
            found += 1
    if "--server" in options or "--port" in options:
        host, port = options.get("--server", ""), options.get("--port", "")
        address = str(resolve(host)) if host else ""
        if not port.isdigit() or (address, int(port)) not in targets:
            raise TargetRefused(f"refusing to run: {spec.generator} would connect to "
                                f"{host or '?'}:{port or '?'}, which is not the target "
                                f"{spec.targets[0]}")
        found += 1
    if "--uri" in options:
        check_request_path(options["--uri"])
    if not found:
        raise TargetRefused(f"refusing to run: the {spec.generator} command names no "
                            f"destination to check: {argv}")
    return argv


def refuse(spec: LoadSpec, tool: str, *, cold: bool = True, stream: bool = True) -> None:
    if cold and spec.cold_conns:
        raise Unsupported(f"{tool} cannot hold idle (cold) connections; use sclient or asyncio")
    if stream and spec.stream_conns:
        raise Unsupported(f"{tool} has no stream mode; use sclient")
    if len(spec.targets) > 1:
        raise Unsupported(f"{tool} takes one target; use sclient for several")
    if not spec.hot_conns:
        raise Unsupported(f"{tool} needs hot connections (hot_conns > 0)")


def to_us(value: str, unit: str) -> float:
    """'1.37', 'ms' -> 1370.0 microseconds."""
    return float(value) * _TIME_UNITS[unit]


def duration_us(text: str) -> float:
    """wrk's '2.10s', '1.00m', '850.00ms' -> microseconds."""
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text)
    if not m:
        raise ValueError(f"unrecognised duration {text!r}")
    return to_us(m.group(1), m.group(2))


def search(pattern: str, text: str, tool: str) -> re.Match[str]:
    m = re.search(pattern, text, re.MULTILINE)
    if not m:
        raise ValueError(f"{tool} output has no line matching {pattern!r}; was the run cut short?")
    return m
