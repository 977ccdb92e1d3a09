"""LoadSpec: what to run, the same for every generator."""

from __future__ import annotations

import ipaddress
import json
from dataclasses import asdict, dataclass
from typing import Any, Literal

from clients.targets import TargetRefused, check_request_path, check_target, split_host_port

Generator = Literal["sclient", "asyncio", "httperf", "wrk", "wrk2"]
GENERATORS: tuple[str, ...] = ("sclient", "asyncio", "httperf", "wrk", "wrk2")


@dataclass
class LoadSpec:
    generator: Generator
    targets: list[str]
    hot_conns: int = 0
    rate_rps: float | None = None  # None: closed loop
    arrivals: Literal["fixed", "poisson"] = "fixed"
    duration_s: float = 10.0  # measured window; 0 = hold cold connections until signalled
    warmup_s: float = 1.0
    requests_per_conn: int | None = None  # None: persistent
    path: str = "/"
    connect_timeout_s: float = 5.0
    response_timeout_s: float = 5.0
    cold_conns: int = 0
    cold_ramp_rps: float | None = None  # None: as fast as the generator can open them
    cold_interval_s: float | None = None  # None: silent
    source_addrs: list[str] | str | None = None  # list, CIDR string, or None (automatic)
    stream_conns: int = 0
    stream_mbps: float | None = None
    seed: int = 1
    cpu: int | None = None
    json_path: str | None = None
    max_outstanding: int = 1
    late_us: float | None = None  # None: the generator's default
    spin_us: int = 0  # sclient: fixed poll lead; 0: adaptive (clients/README.md)
    coalesce_us: int = 0  # sclient: never sleep for less (fewer wake-ups at high rates)
    workers: int = 0  # sclient shards; 0: automatic from RLIMIT_NOFILE
    hog: bool = False  # httperf --hog: only when asked (it spins when ports run out)
    threads: int | None = None  # wrk/wrk2 threads; None: min(hot_conns, 2)
    allow_any_target: bool = False

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
        if not (self.hot_conns or self.cold_conns or self.stream_conns):
            raise ValueError("nothing to run: set hot_conns, cold_conns or stream_conns")
        if self.rate_rps is not None and self.rate_rps <= 0:
            raise ValueError(f"rate_rps {self.rate_rps} must be > 0 (None for closed loop)")
        if self.duration_s < 0 or (self.duration_s == 0 and not self.cold_only):
            raise ValueError("duration_s must be > 0 (0 = hold until signalled, cold-only runs)")
        if isinstance(self.source_addrs, str):
            ipaddress.ip_network(self.source_addrs, strict=False)
        check_sclient_only(self.generator, spin_us=self.spin_us, coalesce_us=self.coalesce_us)

    @property
    def cold_only(self) -> bool:
        return bool(self.cold_conns) and not self.hot_conns and not self.stream_conns

    def resolved_targets(self) -> list[tuple[str, int]]:
        """(address, port) per target, refusing any outside the load-target policy."""
        out = []
        for t in self.targets:
            host, port = split_host_port(t)
            out.append((check_target(host, self.allow_any_target), port))
        return out

    def config(self) -> dict[str, Any]:
        """The spec as the result document's `config` (JSON-safe)."""
        return json.loads(json.dumps(asdict(self), default=str))  # paths become strings


def check_sclient_only(generator: str, **options: int) -> None:
    """Options that decide when wb-sclient sleeps; other generators have none."""
    for name, value in options.items():
        if value and generator != "sclient":
            raise ValueError(f"{name} is a wb-sclient option; generator {generator!r} cannot "
                             f"poll or coalesce its sleeps: use generator: sclient or drop {name}")


def native_argv(spec: LoadSpec) -> list[str]:
    """Options shared by wb-sclient and the asyncio generator (same flag names)."""
    argv: list[str] = []
    for host, port in spec.resolved_targets():
        argv += ["--target", f"{host}:{port}"]
    opts: list[tuple[str, Any]] = [
        ("--hot-conns", spec.hot_conns or None),
        ("--rate", spec.rate_rps),
        ("--arrivals", spec.arrivals),
        ("--duration", spec.duration_s),
        ("--warmup", spec.warmup_s),
        ("--requests-per-conn", spec.requests_per_conn),
        ("--path", spec.path),
        ("--connect-timeout", spec.connect_timeout_s),
        ("--response-timeout", spec.response_timeout_s),
        ("--max-outstanding", spec.max_outstanding),
        ("--late-us", spec.late_us),
        ("--spin-us", spec.spin_us or None),
        ("--coalesce-us", spec.coalesce_us or None),
        ("--cold", spec.cold_conns or None),
        ("--cold-ramp", spec.cold_ramp_rps),
        ("--cold-interval", spec.cold_interval_s),
        ("--source", _sources(spec.source_addrs)),
        ("--stream", spec.stream_conns or None),
        ("--stream-mbps", spec.stream_mbps),
        ("--seed", spec.seed),
        ("--cpu", spec.cpu),
        ("--json", spec.json_path),
    ]
    for flag, value in opts:
        if value is not None:
            argv += [flag, str(value)]
    return check_native_argv(spec, argv)


def check_native_argv(spec: LoadSpec, argv: list[str]) -> list[str]:
    """The last look at wb-sclient's/asyncgen's argv: every --target is one of the spec's
    checked targets and --path is a request path (however the argv came to be built)."""
    targets = spec.resolved_targets()
    found = 0
    for flag, value in zip(argv, argv[1:], strict=False):
        if flag == "--target":
            host, port = split_host_port(value)
            if (check_target(host, spec.allow_any_target), port) not in targets:
                raise TargetRefused(f"refusing to run: the generator's --target {value} is not "
                                    f"one of the spec's targets {spec.targets}")
            found += 1
        elif flag == "--path":
            check_request_path(value)
    if not found:
        raise TargetRefused("refusing to run: the generator's argv names no --target")
    return argv


def _sources(value: list[str] | str | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return ",".join(value)
