"""The asyncio generator's command line: LoadSpec's options under the same flags as
wb-sclient, checked like wb-sclient checks them."""

from __future__ import annotations

import argparse
import resource

from clients import sources
from clients.spec import add_arguments, check_duration, check_window, native_options, options
from clients.targets import check_request_path, split_host_port

# Like wb-sclient, the generator measures from its start unless told to warm up.
NATIVE_DEFAULTS = {"warmup_s": 0.0}
FD_RESERVE = 64  # descriptors kept for stdio, the event loop and its self-pipe


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m clients.asyncgen",
        description="The asyncio load generator: wb-sclient's hot and cold modes in portable "
                    "Python, with its options and result schema (uvloop when installed).")
    add_arguments(p, [*options(["targets"]), *native_options("asyncio")], NATIVE_DEFAULTS)
    return p


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = parser()
    a = p.parse_args(argv)
    try:
        check_request_path(a.path)
    except ValueError as exc:
        p.error(f"--path: {exc}")
    if a.stream_conns:
        p.error("--stream: the asyncio generator has no stream mode; use wb-sclient")
    if not (a.hot_conns or a.cold_conns):
        p.error("nothing to do: give --hot-conns or --cold")
    try:
        check_duration(a.duration_s, bool(a.cold_conns) and not a.hot_conns)
    except ValueError as exc:
        p.error(f"--duration: {exc}")
    try:
        check_window(a.window_start_ns, a.window_end_ns)
    except ValueError as exc:
        p.error(f"--window-end-ns: {exc}")
    a.target_addrs = []
    for t in a.targets:
        try:
            a.target_addrs.append(split_host_port(t))
        except ValueError:
            p.error(f"--target {t}: expected ADDR:PORT")
    total = a.hot_conns + a.cold_conns
    a.sources = sources.source_addresses(a.source_addrs, [h for h, _ in a.target_addrs], total)
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
    if total + FD_RESERVE > limit:
        p.error(f"{total} connections exceed RLIMIT_NOFILE {limit}; the asyncio "
                "generator does not shard: use wb-sclient")
    given = a.source_addrs
    a.config = {"targets": a.targets,
                "source_addrs": ",".join(given) if isinstance(given, list) else given,
                "source_addr_count": len(a.sources),
                "hot_conns": a.hot_conns, "rate_rps": a.rate_rps or None,
                "arrivals": a.arrivals, "requests_per_conn": a.requests_per_conn or None,
                "path": a.path, "connect_timeout_s": a.connect_timeout_s,
                "response_timeout_s": a.response_timeout_s,
                "max_outstanding": a.max_outstanding, "cold_conns": a.cold_conns,
                "cold_ramp_rps": a.cold_ramp_rps or None,
                "cold_interval_s": a.cold_interval_s or None,
                "duration_s": a.duration_s, "warmup_s": a.warmup_s, "seed": a.seed,
                "cpu": a.cpu}
    return a
