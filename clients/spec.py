"""LoadSpec: what to run, the same for every generator."""

from __future__ import annotations

import argparse
import functools
import ipaddress
import json
import math
import subprocess
import types
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, Field, asdict, dataclass, field, fields
from typing import Any, Literal, get_args, get_origin, get_type_hints

from clients import paths
from clients.targets import (
    TargetRefused,
    check_request_path,
    check_target,
    resolve,
    split_host_port,
)
from clients.validity import LATE_LIMIT, LATE_THRESHOLD_US, POISSON_SIGMAS, GeneratorFacts

Generator = Literal["sclient", "asyncio", "httperf", "wrk", "wrk2"]
GENERATORS: tuple[str, ...] = ("sclient", "asyncio", "httperf", "wrk", "wrk2")


@functools.cache
def sclient_description(binary: str | None = None) -> dict[str, Any]:
    """What wb-sclient takes, as it says itself (`wb-sclient --describe`): its limits
    (inclusive ranges) and defaults. The binary decides them; Python keeps no copy."""
    argv = [binary or str(paths.binary("wb-sclient")), "--describe"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    if done.returncode != 0:
        raise paths.MissingBinary(f"{argv[0]} --describe failed ({done.stderr.strip()}); fix: "
                                  f"run `make` in {paths.REPO_ROOT}")
    return json.loads(done.stdout)


def check_within(flag: str, value: float, what: str | None = None) -> float:
    """value, if wb-sclient's --flag takes it (its described range, the widest any wanbench
    generator takes); else ValueError naming `what` (default: the flag)."""
    low, high = sclient_description()["limits"][flag]
    if not low <= value <= high:
        raise ValueError(f"{what or '--' + flag} {_number(value)} is outside "
                         f"{_number(low)}..{_number(high)}")
    return value


def _number(value: float) -> str:
    """1,000,000 rather than 1e+06; 0.001 as it is."""
    return f"{int(value):,}" if float(value).is_integer() and abs(value) < 1e18 else f"{value:g}"


def check_ranges(spec: LoadSpec) -> None:
    """Every number of spec within the range wb-sclient describes for its flag (a number
    no generator could take, e.g. an infinite rate, is refused before any starts)."""
    limits = sclient_description()["limits"]
    for f in options():
        value, flag = getattr(spec, f.name), f.metadata["flag"].removeprefix("--")
        if flag in limits and isinstance(value, int | float) and not isinstance(value, bool):
            check_within(flag, value, f.name)


def check_duration(duration_s: float, cold_only: bool) -> float:
    """A measured window; 0 holds cold connections until signalled, for cold-only runs."""
    if duration_s < 0 or (duration_s == 0 and not cold_only):
        raise ValueError("duration_s must be > 0 (0 = hold until signalled, cold-only runs)")
    return duration_s


def sclient_sockets(rate_rps: float, connect_timeout_s: float, response_timeout_s: float) -> int:
    """The sockets an S-Client (overload: sclient) needs in flight at once to keep offering
    rate_rps whatever the server does: at worst every attempt lives its whole connect and
    response timeouts, so the sockets in use are the sends of the last such span, on average
    rate × span. Their count is a Poisson draw for Poisson arrivals (each socket's life is at
    most the span: an M/G/∞ count) and less for a fixed schedule: POISSON_SIGMAS of its
    standard deviation more keep a send from finding none free but rarely."""
    mean = rate_rps * (connect_timeout_s + response_timeout_s)
    return math.ceil(mean + POISSON_SIGMAS * math.sqrt(mean))


def settling_s(overload: str, connect_timeout_s: float, response_timeout_s: float) -> float:
    """The shortest warm-up that lets a hot generator settle: overload: sclient's sockets in
    flight settle once the first attempts have lived their connect and response timeouts;
    a queue needs none of its own."""
    return connect_timeout_s + response_timeout_s if overload == "sclient" else 0.0


def check_sclient_overload(overload: str, *, generator: str, hot_conns: int,
                           rate_rps: float | None, requests_per_conn: int | None,
                           connect_timeout_s: float, response_timeout_s: float,
                           warmup_s: float) -> None:
    """overload: sclient opens one socket per scheduled send (one request per connection, at
    an offered rate), and hot_conns is the most it may have in flight: refused up front
    when that is too few to keep offering the rate (sclient_sockets), with the fix. The
    sockets in flight settle once the first attempts have lived their timeouts: a warm-up
    shorter than that opens the window before steady state. A rate of None is checked by
    the caller (a scenario's sweep may set it)."""
    if overload == "queue":
        return
    if generator != "sclient":
        raise ValueError(f"overload: sclient is wb-sclient's; generator {generator!r} has no "
                         f"such mode: use generator: sclient or drop overload")
    if requests_per_conn != 1:
        raise ValueError("overload: sclient opens one socket per scheduled send: give "
                         "requests_per_conn: 1")
    span = settling_s(overload, connect_timeout_s, response_timeout_s)
    if warmup_s < span:
        raise ValueError(f"overload: sclient's sockets in flight settle after the connect and "
                         f"response timeouts ({span:g} s); a warm-up of {warmup_s:g} s opens "
                         f"the window before steady state; fix: warmup_s >= {span:g}, or "
                         f"shorter timeouts")
    if rate_rps is None:
        return
    needed = sclient_sockets(rate_rps, connect_timeout_s, response_timeout_s)
    if hot_conns < needed:
        raise ValueError(
            f"overload: sclient with {hot_conns:,} hot connections cannot keep offering "
            f"{rate_rps:,.0f} req/s: attempts that last their timeouts ({span:g} s) keep up to "
            f"{needed:,} sockets in flight; fix: hot.conns (--hot-conns) >= {needed:,}, or "
            f"shorter connect and response timeouts")


NATIVE = ("sclient", "asyncio")  # the generators whose flags are named after these options
SCLIENT = ("sclient",)


def option(flag: str, default: Any = MISSING, *, native: tuple[str, ...] = NATIVE,
           load: bool = True, **argparse: Any) -> Any:
    """A LoadSpec field with its command-line face beside it: flag, help, metavar.

    native: the generators that take the option under this flag (native_argv passes it);
    load: `wanbench load` offers it. argparse: help, metavar and anything the field's type
    does not say (action, required, a converting type, the command line's own default)."""
    return field(default=default,
                 metadata={"flag": flag, "native": native, "load": load, "argparse": argparse})


def source_addrs_arg(text: str) -> list[str] | str | None:
    """--source as given: a CIDR string, a comma list, or 'auto' (None: the generator picks)."""
    if text == "auto":
        return None
    return text if "/" in text else text.split(",")


@dataclass
class LoadSpec:
    generator: Generator = option("--generator", native=(), cli_default="sclient",
                                  help="which load generator runs")
    targets: list[str] = option("--target", native=(), action="append", required=True,
                                metavar="HOST:PORT",
                                help="server to load (repeatable for sclient/asyncio)")
    hot_conns: int = option("--hot-conns", 0, metavar="N",
                            help="busy connections that send the requests")
    rate_rps: float | None = option("--rate", None, metavar="R",
                                    help="requests/s; omit for a closed loop")
    arrivals: Literal["fixed", "poisson"] = option(
        "--arrivals", "fixed", help="with --rate: evenly spaced sends, or Poisson arrivals")
    duration_s: float = option("--duration", 10.0, metavar="S",
                               help="measured seconds (0: hold cold connections until Ctrl-C)")
    warmup_s: float = option("--warmup", 1.0, metavar="S",
                             help="seconds of load before the measured window")
    requests_per_conn: int | None = option("--requests-per-conn", None, metavar="N",
                                           help="default: persistent")
    pick: Literal["last", "random"] = option(
        "--pick", "last", native=SCLIENT,
        help="sclient, open loop: send on the connection that finished last (few connections "
             "do the work) or on a random ready one (every connection sends now and then, so "
             "the idle set keeps changing)")
    overload: Literal["queue", "sclient"] = option(
        "--overload", "queue", native=SCLIENT,
        help="sclient, open loop, one request per connection: past the server's capacity "
             "sends wait for one of --hot-conns connections (queue), or each opens its own "
             "socket at its time, aborted at its timeout, at most --hot-conns in flight "
             "(sclient: Banga & Druschel's S-Client, the offered rate never waits)")
    path: str = option("--path", "/",
                       help="request path: starts with /, printable ASCII without @ \\ \" "
                            "(percent-encode those); the host goes in --target")
    connect_timeout_s: float = option(
        "--connect-timeout", 5.0, metavar="S",
        help="a connect taking longer is an error (S-Client's timeout: the offered load "
             "never waits for the server)")
    response_timeout_s: float = option(
        "--response-timeout", 5.0, metavar="S",
        help="a reply taking longer is an error and its connection is replaced")
    cold_conns: int = option("--cold", 0, metavar="N", help="idle connections to hold")
    cold_ramp_rps: float | None = option("--cold-ramp", None, metavar="R",
                                         help="cold connects per second")
    cold_interval_s: float | None = option(
        "--cold-interval", None, metavar="S",
        help="each cold connection sends one request every S seconds")
    source_addrs: list[str] | str | None = option(
        "--source", None, type=source_addrs_arg, metavar="LIST|CIDR",
        help="source addresses (comma list or CIDR)")  # None: automatic
    stream_conns: int = option("--stream", 0, metavar="N", help="stream connections")
    stream_mbps: float | None = option(
        "--stream-mbps", None, metavar="B",
        help="total Mbit/s shared by the stream connections")
    stream_read: bool = option(
        "--stream-read", False, native=SCLIENT, action="store_true",
        help="sclient: the server sends the stream (wb-server --source) at --stream-mbps; the "
             "stream connections read it")
    # The runner's window (harness.runner.window) as CLOCK_MONOTONIC instants: the generator
    # measures exactly [start, end) instead of warmup_s/duration_s after its own start. Set by
    # the run, never from `wanbench load`; wb-sclient and asyncgen take it, the external
    # tools cannot (the runner starts them at the window's start instead).
    window_start_ns: int | None = option("--window-start-ns", None, load=False, metavar="NS",
                                         help="measure from this CLOCK_MONOTONIC instant")
    window_end_ns: int | None = option("--window-end-ns", None, load=False, metavar="NS",
                                       help="measure to this CLOCK_MONOTONIC instant, then "
                                            "wait for stdin to end before exiting")
    seed: int = option("--seed", 1,
                       help="seed of Poisson arrivals and random picks: the same seed, the "
                            "same schedule")
    cpu: int | None = option("--cpu", None, help="pin the generator to this CPU")
    json_path: str | None = option("--json", None, load=False, metavar="PATH",
                                   help="write the result document here")
    max_outstanding: int = option("--max-outstanding", 1, load=False, metavar="N")
    max_connecting: int = option("--max-connecting", 512, load=False, metavar="N",
                                 help="cold and stream connects in flight at once")
    late_us: float | None = option("--late-us", None, load=False, metavar="US",
                                   help="a send later than this is late (default: the "
                                        "late-sends rule's for the generator, "
                                        "clients/validity.py)")
    spin_us: int = option(
        "--spin-us", 0, native=SCLIENT, metavar="US",
        help="sclient: poll instead of sleeping from US before each send until its reply "
             "(µs-level latency at low rates, costs CPU); 0 (default): the lead before each "
             "send adapts to the machine's wake-up lateness")
    coalesce_us: int = option("--coalesce-us", 0, native=SCLIENT, metavar="US",
                              help="sclient: never sleep for less (fewer wake-ups at high rates)")
    workers: int = option("--workers", 0, native=SCLIENT,
                          help="sclient shards (0: automatic)")  # from RLIMIT_NOFILE
    hog: bool = option("--hog", False, native=(),
                       help="httperf --hog (spins when ports run out)")  # only when asked
    threads: int | None = None  # wrk/wrk2 threads; None: min(hot_conns, 2)
    # the share of late sends (past late_us) the late-sends rule allows: the rule's, or the
    # scenario's (clients.validity.Lateness); the runner's judgement, no generator's
    late_limit: float = LATE_LIMIT
    allow_any_target: bool = option("--allow-any-target", False, native=(),
                                    help="allow any target, not only loopback and the "
                                         "198.18.0.0/15 addresses this machine's namespaces "
                                         "hold")
    # 198.18.0.0/15 addresses a cluster run checked that its hosts hold (on other machines);
    # set by the run (harness.cluster), never from a command line
    cluster_addresses: tuple[str, ...] = ()
    # The network namespace the generator sends from (a path such as /run/netns/NAME) when it
    # is not this process's own: the target rule is decided there. Set by the runner, which
    # starts the generator in it, never from a command line
    sender_netns: str | None = None

    def __post_init__(self) -> None:
        if self.generator not in GENERATORS:
            raise ValueError(f"generator {self.generator!r} is not one of {', '.join(GENERATORS)}")
        if isinstance(self.targets, str):
            self.targets = [self.targets]
        if not self.targets:
            raise ValueError("targets is empty: give at least one HOST:PORT")
        for t in self.targets:
            split_host_port(t)
        self.path = check_request_path(self.path)
        if self.arrivals not in ("fixed", "poisson"):
            raise ValueError(f"arrivals {self.arrivals!r} is not fixed or poisson")
        check_ranges(self)
        if self.generator == "sclient":
            most = sclient_description()["limits"]["target"][1]
            if len(self.targets) > most:
                raise ValueError(f"{len(self.targets)} targets: wb-sclient takes at most {most}")
        if not (self.hot_conns or self.cold_conns or self.stream_conns):
            raise ValueError("nothing to run: set hot_conns, cold_conns or stream_conns")
        if self.stream_read and not self.stream_conns:
            raise ValueError("stream_read: the streams that read are stream_conns: set it")
        if self.rate_rps is not None and self.rate_rps <= 0:
            raise ValueError(f"rate_rps {self.rate_rps} must be > 0 (None for closed loop)")
        check_duration(self.duration_s, self.cold_only)
        check_window(self.window_start_ns, self.window_end_ns)
        if isinstance(self.source_addrs, str):
            ipaddress.ip_network(self.source_addrs, strict=False)
        check_sclient_only(self.generator, spin_us=self.spin_us, coalesce_us=self.coalesce_us,
                           pick=self.pick != "last")
        if self.overload == "sclient" and self.rate_rps is None:
            raise ValueError("overload: sclient opens one socket per scheduled send: give a "
                             "rate (--rate)")
        check_sclient_overload(self.overload, generator=self.generator,
                               hot_conns=self.hot_conns, rate_rps=self.rate_rps,
                               requests_per_conn=self.requests_per_conn,
                               connect_timeout_s=self.connect_timeout_s,
                               response_timeout_s=self.response_timeout_s,
                               warmup_s=self.warmup_s)
        if not 0 < self.late_limit <= 1:
            raise ValueError(f"late_limit {self.late_limit:g} is not a share of the sends "
                             f"(0 < limit <= 1)")
        if self.late_us is None:  # the generator is told the rule's threshold; it keeps none
            self.late_us = LATE_THRESHOLD_US.get(self.generator)

    @property
    def cold_only(self) -> bool:
        return bool(self.cold_conns) and not self.hot_conns and not self.stream_conns

    def ipv4_only(self) -> str | None:
        """The tool of this spec that cannot connect to an IPv6 address, if any: wb-sclient
        (hot, cold and stream connections) and httperf."""
        if self.generator == "sclient" or self.cold_conns or self.stream_conns:
            return "wb-sclient"
        return "httperf" if self.generator == "httperf" else None

    def facts(self, doc: dict[str, Any]) -> GeneratorFacts:
        """What a result document of this spec's run says, as the validity rules read it."""
        requests = doc.get("requests") or {}
        errors = doc.get("errors") or {}
        cpu = doc.get("generator_cpu") or {}
        user, system = cpu.get("user_s"), cpu.get("sys_s")
        mean_us = ((doc.get("latency") or {}).get("uncorrected") or {}).get("mean_us")
        stream = doc.get("stream") or {}
        return GeneratorFacts(
            generator=doc.get("generator") or self.generator, asked_s=self.duration_s,
            hot_conns=0 if self.stream_conns else self.hot_conns,
            poisson=self.arrivals == "poisson", window_s=doc.get("duration_s"),
            offered_rps=doc.get("offered_rate_rps"), scheduled=requests.get("scheduled"),
            sent=requests.get("sent"), late=doc.get("late_sends"),
            late_threshold_us=doc.get("late_threshold_us"), late_limit=self.late_limit,
            replies=(doc.get("replies") or {}).get("total"), refused=errors.get("refused"),
            no_local_port=errors.get("no_local_port"),
            no_descriptor=errors.get("no_descriptor"),
            unfinished_shards=doc.get("unfinished_shards"), shards=doc.get("shards") or 1,
            cpu_s=user + system if user is not None and system is not None else None,
            run_delay_s=cpu.get("run_delay_s"), spin_idle_s=cpu.get("spin_idle_s"),
            keeps_offering=self.overload == "sclient", no_socket=requests.get("no_socket"),
            response_mean_s=mean_us / 1e6 if mean_us is not None else None,
            waiting_start=requests.get("waiting_start"),
            waiting_end=requests.get("waiting_end"),
            stream_target_mbps=stream.get("target_mbps"),
            stream_achieved_mbps=stream.get("achieved_mbps"))

    def resolved_targets(self) -> list[tuple[str, int]]:
        """(address, port) per target, refusing any outside the load-target policy."""
        out = []
        for t in self.targets:
            host, port = split_host_port(t)
            address = check_target(host, self.allow_any_target, self.cluster_addresses,
                                   self.sender_netns)
            if ":" in address and self.ipv4_only():
                raise TargetRefused(
                    f"target {t}: {address} is IPv6 and {self.ipv4_only()} speaks IPv4 only; "
                    f"fix: an IPv4 address or a name that resolves to one, e.g. "
                    f"127.0.0.1:{port} or localhost:{port} (wrk, wrk2 and asyncio take IPv6)")
            out.append((address, port))
        return out

    def config(self) -> dict[str, Any]:
        """The spec as the result document's `config` (JSON-safe)."""
        return json.loads(json.dumps(asdict(self), default=str))  # paths become strings


def check_window(start_ns: int | None, end_ns: int | None) -> None:
    """Both edges of a given window or neither, the end after the start."""
    if (start_ns is None) != (end_ns is None):
        raise ValueError("window_start_ns and window_end_ns go together: give both or neither")
    if start_ns is not None and end_ns is not None and end_ns <= start_ns:
        raise ValueError(f"window_end_ns {end_ns} is not after window_start_ns {start_ns}")


def check_sclient_only(generator: str, **options: int) -> None:
    """Options only wb-sclient has (when it sleeps, which connection sends): each is refused,
    when set, for the other generators."""
    for name, value in options.items():
        if value and generator != "sclient":
            raise ValueError(f"{name} is a wb-sclient option; generator {generator!r} has no "
                             f"such control: use generator: sclient or drop {name}")


def options(names: Iterable[str] | None = None) -> list[Field]:
    """LoadSpec's fields that have a command line, in declaration order (or only names)."""
    wanted = None if names is None else set(names)
    return [f for f in fields(LoadSpec)
            if "flag" in f.metadata and (wanted is None or f.name in wanted)]


def load_options() -> list[Field]:
    """The options `wanbench load` offers."""
    return [f for f in options() if f.metadata["load"]]


def native_options(generator: str) -> list[Field]:
    """The options generator takes under LoadSpec's flag names (wb-sclient, asyncgen)."""
    return [f for f in options() if generator in f.metadata["native"]]


def add_arguments(parser: argparse.ArgumentParser, opts: Iterable[Field],
                  defaults: Mapping[str, Any] | None = None) -> None:
    """One argparse option per field: dest is the field's name, the type, choices or
    store_true come from its annotation, the default from the field (or defaults)."""
    hints = get_type_hints(LoadSpec)
    for f in opts:
        kw = dict(f.metadata["argparse"])
        cli_default = kw.pop("cli_default", f.default)
        kind = _base_type(hints[f.name])
        if kind is bool:
            kw.setdefault("action", "store_true")
        elif get_origin(kind) is Literal:
            kw.setdefault("choices", get_args(kind))
        elif kind in (int, float, str):
            kw.setdefault("type", kind)
        if not kw.get("required"):
            kw["default"] = (defaults or {}).get(f.name, cli_default)
        parser.add_argument(f.metadata["flag"], dest=f.name, **kw)


def _base_type(hint: Any) -> Any:
    """int for `int | None`; other hints as they are."""
    args = [a for a in get_args(hint) if a is not type(None)]
    return args[0] if isinstance(hint, types.UnionType) and len(args) == 1 else hint


def native_argv(spec: LoadSpec) -> list[str]:
    """wb-sclient's or the asyncio generator's argv for spec: the checked targets, then every
    option it takes that is set. An option left at a default of 0 or None is not passed: the
    generator's own default is the same, and wb-sclient reads a given --spin-us as fixed."""
    argv: list[str] = []
    for host, port in spec.resolved_targets():
        argv += ["--target", f"{host}:{port}"]
    for f in native_options(spec.generator):
        value = getattr(spec, f.name)
        if value is None or (not value and value == f.default):
            continue
        if value is True:  # a switch: its flag alone
            argv.append(f.metadata["flag"])
            continue
        argv += [f.metadata["flag"], ",".join(value) if isinstance(value, list) else str(value)]
    return check_native_argv(spec, argv)


def check_native_argv(spec: LoadSpec, argv: list[str]) -> list[str]:
    """The last look at wb-sclient's/asyncgen's argv: every --target is one of the spec's
    checked targets and --path is a request path (however the argv came to be built)."""
    targets = spec.resolved_targets()
    found = 0
    for flag, value in zip(argv, argv[1:], strict=False):
        if flag == "--target":
            host, port = split_host_port(value)
            if (str(resolve(host)), port) not in targets:
                raise TargetRefused(f"refusing to run: the generator's --target {value} is not "
                                    f"one of the spec's targets {spec.targets}")
            found += 1
        elif flag == "--path":
            check_request_path(value)
    if not found:
        raise TargetRefused("refusing to run: the generator's argv names no --target")
    return argv
