"""Scenario YAML: the validated experiment description and its grid of sweep points."""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import operator
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from clients.paths import REPO_ROOT
from clients.spec import (
    GENERATORS,
    LoadSpec,
    check_sclient_only,
    check_sclient_overload,
    check_within,
)
from clients.targets import check_request_path
from clients.validity import Lateness
from harness.results.format import PARAMETER_COLUMNS, UNIT_SUFFIXES, ResultsFormatError
from harness.servers import check_rt_signal_queue, describe
from harness.templates import Template, check_sizes
from harness.topology.backends import CHOICES as BACKEND_CHOICES
from harness.topology.cgroups import MAX_PERIOD_US, MIN_PERIOD_US, check_budget
from harness.topology.model import TopologyError, load_topology
from harness.yamlfile import (
    MAX_FILE_BYTES,
    Document,
    Override,
    Strict,
    YamlError,
    choices,
    nearest,
    problems,
    quote,
    set_path,
    split_key,
    summary,
)


class ScenarioError(ValueError):
    """A scenario that cannot be run; the message names file:line, field and allowed values."""


class SweepPointError(ScenarioError):
    """A point of the sweep that does not validate, with the document path of the sweep's
    value that made it (("sweep", key, level) or ("sweep", key) for a range)."""

    def __init__(self, message: str, blamed: tuple[Any, ...]):
        super().__init__(message)
        self.blamed = blamed


# Bounds of a point's times: a typo of `.inf` or 1e30 must be refused, not run for ever.
MAX_WAIT_S = 600.0  # any one wait: a timeout, a warm-up, a server getting ready
MAX_DURATION_S = 3600.0  # a measured window, a cold connection's interval


def within(flag: str) -> AfterValidator:
    """The range wb-sclient takes for --flag (`wb-sclient --describe`): a value past it would
    fail every point instead of being refused here."""
    return AfterValidator(lambda value: check_within(flag, value, "value"))


class TopologyRef(Strict):
    file: str = "topologies/loopback.yaml"
    backend: Literal[BACKEND_CHOICES] = "auto"  # type: ignore[valid-type]
    set: dict[str, bool | str | int | float] = Field(default_factory=dict)

    def path(self, base: Path) -> Path:
        # exists(), not is_file(): the loader names what else it is (a FIFO, a device)
        for candidate in (base / self.file, REPO_ROOT / self.file):
            if candidate.exists():
                return candidate
        raise ValueError(f"topology file {self.file!r} not found (looked beside the scenario "
                         f"and in {REPO_ROOT})")


class WbServer(Strict):
    kind: Literal["wb-server"] = "wb-server"
    # defaults and limits are wb-server's own (`wb-server --describe`)
    dispatch: str = Field(default_factory=lambda: describe().defaults["dispatch"])
    accept: str = Field(default_factory=lambda: describe().defaults["accept"])
    reply_bytes: int = Field(default_factory=lambda: describe().defaults["reply_bytes"])
    workers: int = Field(default_factory=lambda: describe().defaults["workers"])
    # while requests keep coming, sleep this long before each wait, so that one wake-up
    # serves several (fewer wake-ups, longer responses: servers/README.md)
    min_wait_us: int = Field(default_factory=lambda: describe().defaults["min_wait_us"])
    backlog: int | None = None
    port: int = Field(8080, ge=1, le=65535)
    # RLIMIT_SIGPENDING for the server; the papers' Linux 2.4 queued at most 1024 RT signals
    rt_signal_queue: int | None = None

    @field_validator("rt_signal_queue")
    @classmethod
    def _rt_signal_queue(cls, value: int | None) -> int | None:
        return None if value is None else check_rt_signal_queue(value)

    @field_validator("dispatch")
    @classmethod
    def _dispatch(cls, value: str) -> str:
        return describe().check_dispatch(value)

    @field_validator("accept", mode="before")
    @classmethod
    def _accept(cls, value: Any) -> str:
        return describe().check_accept(str(value))  # YAML reads `accept: 4` as a number

    @field_validator("reply_bytes", "workers", "backlog", "min_wait_us")
    @classmethod
    def _within_limits(cls, value: int | None, info: ValidationInfo) -> int | None:
        return None if value is None else describe().check_limit(info.field_name, value)


def check_file_name(name: str) -> str:
    """Return name if it is a plain file name inside an external server's work directory.

    The runner writes each `files:` entry to WORKDIR/NAME as root, so a name is one plain
    path component: not empty, not absolute, no '/', not '.' or '..', no NUL. (Subdirectories
    are not created for them; refer to the files as {workdir}/NAME in the command.)"""
    problem = ("is empty" if not name
               else "holds a NUL character" if "\0" in name
               else "is absolute" if name.startswith("/")
               else "climbs out of the work directory" if ".." in name.split("/")
               else "names a directory" if name in (".", "..") or name.endswith("/")
               else "holds '/'" if "/" in name
               else None)
    if problem:
        raise ValueError(f"file name {name!r} {problem}: files are written into the server's "
                         f"work directory and nowhere else; fix: give a plain file name such "
                         f"as nginx.conf and refer to it as {{workdir}}/NAME")
    return name


# What an external server's templates fill in; before the run gives {workdir} a path,
# validation counts it at its longest (PATH_MAX).
TEMPLATE_FIELDS = ("workdir", "address", "port", "reply_bytes", "body")
PATH_MAX = 4096


class ExternalServer(Strict):
    """Any server started by a command, e.g. nginx; ready when its port accepts.

    Its command runs as root, as written; its files land in the run's work directory."""

    kind: Literal["external"]
    name: str = Field(min_length=1, max_length=64)
    command: list[str] = Field(min_length=1)
    files: dict[str, str] = Field(default_factory=dict)
    port: int = Field(ge=1, le=65535)
    # a body as large as wb-server's largest
    reply_bytes: int | None = None
    ready_timeout_s: float = Field(10.0, gt=0, le=MAX_WAIT_S)

    @field_validator("files")
    @classmethod
    def _files(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            check_file_name(name)
        return value

    @field_validator("reply_bytes")
    @classmethod
    def _reply_bytes(cls, value: int | None) -> int | None:
        return None if value is None else describe().check_limit("reply_bytes", value)

    @model_validator(mode="after")
    def _templates_fill(self) -> ExternalServer:
        # a template that cannot fill, or would fill too much, fails here, not in the run
        self._templates({"workdir": PATH_MAX, "address": len("255.255.255.255"),
                         "port": len(str(self.port)),
                         "reply_bytes": len(str(self.reply_bytes or 0)),
                         "body": self.reply_bytes or 0})
        return self

    def _templates(self, lengths: dict[str, int]) -> tuple[list[Template], list[Template]]:
        """The command's and the files' templates, parsed and held to their sizes."""
        command = [Template.parse(arg, TEMPLATE_FIELDS, f"command[{i}]")
                   for i, arg in enumerate(self.command)]
        files = [Template.parse(text, TEMPLATE_FIELDS, f"files.{name}")
                 for name, text in self.files.items()]
        # the files hold the reply body once and what the scenario itself wrote
        check_sizes(command, files, lengths,
                    describe().limits["reply_bytes"][1] + MAX_FILE_BYTES)
        return command, files

    def render(self, workdir: Path, address: str) -> tuple[dict[Path, str], list[str]]:
        """The files to write (each inside workdir) and the argv, with {workdir}, {address},
        {port}, {reply_bytes} and {body} filled in."""
        values = {"workdir": str(workdir), "address": address, "port": str(self.port),
                  "reply_bytes": str(self.reply_bytes or 0), "body": "x" * (self.reply_bytes or 0)}
        command, files = self._templates({k: len(v.encode()) for k, v in values.items()})
        written = {workdir / check_file_name(name): template.fill(values)
                   for name, template in zip(self.files, files, strict=True)}
        if any(path.parent != workdir for path in written):  # check_file_name's promise, kept
            raise ValueError("a file name leaves the work directory")
        return written, [template.fill(values) for template in command]


class Hot(Strict):
    generator: Literal[GENERATORS] = "sclient"  # type: ignore[valid-type]
    conns: Annotated[int, within("hot-conns")] = 10
    rate_rps: Annotated[float, within("rate")] | None = Field(None, gt=0)
    arrivals: Literal["fixed", "poisson"] = "fixed"
    requests_per_conn: Annotated[int, within("requests-per-conn")] | None = Field(None, ge=1)
    # sclient, open loop: "random" spreads sends over every connection, so each one sends
    # now and then and the idle set keeps changing (CM01's periodic connections)
    pick: Literal["last", "random"] = "last"
    # sclient, open loop, one request per connection: "sclient" opens a socket per scheduled
    # send, aborted at its timeout, so the offered rate holds past the server's capacity
    # (the papers' S-Client); conns is then the most in flight and must cover rate × the two
    # timeouts. "queue": sends wait for one of conns connections the server may still hold.
    overload: Literal["queue", "sclient"] = "queue"
    path: str = "/"
    connect_timeout_s: Annotated[float, within("connect-timeout")] = Field(
        LoadSpec.connect_timeout_s, le=MAX_WAIT_S)
    response_timeout_s: Annotated[float, within("response-timeout")] = Field(
        LoadSpec.response_timeout_s, le=MAX_WAIT_S)
    # sclient: poll instead of sleeping from spin_us before each send until its reply, so
    # the generator's own wake-up stays out of µs-level latencies at low rates (costs CPU);
    # 0: the lead before each send adapts to the machine (clients/README.md)
    spin_us: int = Field(0, ge=0, le=1_000_000)
    # sclient: never sleep for less than this between sends; past ~75,000 req/s a timer
    # wake-up per request caps the generator, coalesced sleeps hold 200,000+
    coalesce_us: int = Field(0, ge=0, le=1_000_000)
    # A closed loop is meant to load the server: a point where it was not the bottleneck
    # measured the generator, the link or the round trips, and is invalid
    # (clients.validity.closed_loop_elsewhere). false: the sweep is meant to go from
    # round-trip-bound to server-bound (cpp Fig 2's throughput vs connections), so each
    # point's bottleneck is recorded (server_saturated), not judged, unless the generator
    # was kept from its CPU.
    server_bound: bool = True
    # The late-sends rule's limits for this load (clients.validity.Lateness): a send is late
    # past late_us after its intended time; more than late_limit_pct of them late makes the
    # point invalid. Unset: the rule's defaults for the generator. A scenario that changes
    # them says so in its manifest and under every table of its points; the reproduction's
    # scenarios keep the defaults.
    late_us: float | None = Field(None, gt=0, le=1_000_000)
    late_limit_pct: float | None = Field(None, gt=0, le=100)

    @property
    def lateness(self) -> Lateness:
        return Lateness.of(self.generator, self.late_us, self.late_limit_pct)

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        return check_request_path(value)

    @model_validator(mode="after")
    def _spin_is_sclients(self) -> Hot:
        check_sclient_only(self.generator, spin_us=self.spin_us, coalesce_us=self.coalesce_us,
                           pick=self.pick != "last")
        if not self.server_bound and self.rate_rps is not None:
            raise ValueError("server_bound: false is for a closed loop (no rate_rps): an "
                             "open loop's offered rate, not the server, sets its load")
        return self


class Cold(Strict):
    conns: Annotated[int, within("cold")] = 0
    ramp_rps: Annotated[float, within("cold-ramp")] = Field(20_000, gt=0)
    interval_s: float | None = Field(None, gt=0, le=MAX_DURATION_S)


class Stream(Strict):
    conns: Annotated[int, within("stream")] = Field(ge=1)
    mbps: Annotated[float, within("stream-mbps")] = Field(gt=0)
    # Which side writes: the generator's streams to a server that reads (wb-server --sink),
    # or the server (wb-server --source) to streams that read. The server's host is the one
    # measured, so `server` measures the sender's stack, as the cycles-per-packet study did.
    sender: Literal["generator", "server"] = "generator"


class Cpus(Strict):
    server: int = Field(0, ge=0)
    generator: int = Field(1, ge=0)
    # The server's share of its CPU (cgroup CPU bandwidth, harness/topology/cgroups.py): a slower
    # server saturates first, as the papers' did beside many client machines. A throttled
    # server waits up to (100 - pct) % of a period, so the period bounds what throttling adds
    # to response times: 10 ms keeps it to single-digit ms (docs/validity.md).
    server_budget_pct: float | None = Field(None, gt=0, le=100)
    budget_period_us: int = Field(10_000, ge=MIN_PERIOD_US, le=MAX_PERIOD_US)

    @model_validator(mode="after")
    def _distinct_and_present(self) -> Cpus:
        count = os.cpu_count() or 1
        for role, cpu in (("server", self.server), ("generator", self.generator)):
            if cpu >= count:
                raise ValueError(f"{role} CPU {cpu} does not exist here (CPUs 0-{count - 1})")
        if self.server == self.generator:
            raise ValueError("server and generator must be pinned to different CPUs: a "
                             "generator sharing the server's CPU measures itself")
        if self.server_budget_pct is not None:
            check_budget(self.server_budget_pct, self.budget_period_us)
        return self


MAX_GUEST_S = 7 * 86_400.0  # a week: a long sweep under an emulated CPU, not for ever


class Guest(Strict):
    """The virtual machine of `wanbench run --kernel IMAGE` (harness/guest): its size and
    which host CPUs its vCPU threads are pinned to. The host's own kernel ignores it."""

    cpus: int = Field(2, ge=1, le=64)
    memory_mb: int = Field(2048, ge=512, le=262_144)
    # host CPUs for the vCPU threads, one each (vng --pin); None leaves them unpinned
    pin: list[int] | None = None
    # the whole guest run, boot to power-off: past it the guest is killed as hung
    timeout_s: float = Field(1800, gt=0, le=MAX_GUEST_S)

    @model_validator(mode="after")
    def _pin_fits(self) -> Guest:
        count = os.cpu_count() or 1
        if self.pin is not None:
            missing = [cpu for cpu in self.pin if not 0 <= cpu < count]
            if missing:
                raise ValueError(f"guest.pin: CPU(s) {missing} do not exist here "
                                 f"(CPUs 0-{count - 1})")
            if len(self.pin) != self.cpus:
                raise ValueError(f"guest.pin names {len(self.pin)} host CPU(s) for "
                                 f"{self.cpus} vCPU(s); give one per vCPU or leave it out")
        return self


# A sweep's points × repetitions: each is a measurement of seconds, and the grid is built in
# memory; a range's or a grid's size is checked before it is built.
MAX_POINT_RUNS = 10_000


class Range(Strict):
    start: float
    stop: float
    step: float
    as_: str | None = Field(None, alias="as")

    @model_validator(mode="after")
    def _step(self) -> Range:
        if self.step <= 0 or self.stop < self.start:
            raise ValueError("a range needs step > 0 and stop >= start")
        if self.count() > MAX_POINT_RUNS:
            raise ValueError(f"a range of {self.count():,.0f} values; a sweep runs at most "
                             f"{MAX_POINT_RUNS:,} points × repetitions; fix: a larger step")
        return self

    def count(self) -> float:
        """How many values (a float: a huge range is counted, not built)."""
        return math.floor((self.stop - self.start) / self.step + 1e-9) + 1.0

    def values(self) -> list[Any]:
        values = [self.start + i * self.step for i in range(int(self.count()))]
        return [int(v) if float(v).is_integer() else v for v in values]


class Values(Strict):
    values: list[Any] = Field(min_length=1)
    as_: str | None = Field(None, alias="as")


def _server_kind(value: Any) -> str:
    kind = value.get("kind", "wb-server") if isinstance(value, dict) else value.kind
    return "external" if kind == "external" else "wb-server"


ServerSpec = Annotated[
    Annotated[WbServer, Tag("wb-server")] | Annotated[ExternalServer, Tag("external")],
    Discriminator(_server_kind),
]

def _axis_kind(value: Any) -> str:
    # Serialising asks too, with the model itself: a Range taken for a list was a Pydantic
    # UserWarning at every run's start (the README's own range syntax).
    if isinstance(value, Range | Values):
        return "range" if isinstance(value, Range) else "values"
    if isinstance(value, dict):
        return "values" if "values" in value else "range"
    return "list"


SweepAxis = Annotated[
    Annotated[list[Any], Field(min_length=1), Tag("list")]
    | Annotated[Range, Tag("range")]
    | Annotated[Values, Tag("values")],
    Discriminator(_axis_kind),
]


# A threshold as k6 writes one: an operator and a number, "< 5", ">= 30000".
THRESHOLD_OPERATORS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
THRESHOLD_FORM = re.compile(r"\s*(<=|>=|<|>)\s*(\S+)\s*")


class Threshold(BaseModel):
    """A bound a point's median must keep (`thresholds: {resp_time_p99_ms: "< 5"}`), checked
    after the run; written and read back as its text."""

    model_config = {"frozen": True}
    operator: Literal["<", "<=", ">", ">="]
    bound: float

    @model_validator(mode="before")
    @classmethod
    def _parse(cls, value: Any) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            return value
        match = THRESHOLD_FORM.fullmatch(value)
        try:
            bound = float(match.group(2)) if match else math.nan
        except ValueError:
            bound = math.nan
        if not match or not math.isfinite(bound):
            raise ValueError(f"{quote(value)} is not a threshold; write an operator (<, <=, >, "
                             f">=) and a number, quoted: \"< 5\", \">= 30000\"")
        return {"operator": match.group(1), "bound": bound}

    @model_serializer
    def _text(self) -> str:
        return str(self)

    def __str__(self) -> str:
        return f"{self.operator} {self.bound:g}"

    def holds(self, value: float) -> bool:
        return bool(THRESHOLD_OPERATORS[self.operator](value, self.bound))


# The measured columns a threshold most often names (docs/results-format.md describes every
# one; tests/runner/test_scenario_errors.py holds these to it): a name that is not a metric
# is offered the nearest of them.
THRESHOLD_METRICS = (
    "reply_rate_rps", "request_rate_rps", "stream_throughput_mbps", "resp_time_mean_ms",
    "resp_time_p50_ms", "resp_time_p99_ms", "resp_time_uncorrected_mean_ms",
    "cpu_server_pct", "cpu_generator_pct", "steal_pct", "server_wait_pct",
    "server_throttled_pct",
)


def check_threshold_metrics(thresholds: dict[str, Threshold]) -> dict[str, Threshold]:
    """A threshold names a measured column: its name ends with its unit (results' rule)."""
    for name in thresholds:
        if name in PARAMETER_COLUMNS or not name.endswith(UNIT_SUFFIXES):
            raise ValueError(f"{quote(name)} is not a metric; a metric's name ends with its "
                             f"unit ({', '.join(UNIT_SUFFIXES)}): e.g. resp_time_p99_ms, "
                             f"reply_rate_rps (docs/results-format.md lists them)"
                             f"{nearest(name, THRESHOLD_METRICS)}")
    return thresholds


class Scenario(Strict):
    name: str

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z0-9][a-z0-9_.-]{0,63}", value):
            raise ValueError(f"name {quote(value)} is not allowed; use up to 64 lowercase "
                             f"letters, digits and - _ . (it names the results directory)")
        return value
    description: str = ""
    topology: TopologyRef = Field(default_factory=TopologyRef)
    server: ServerSpec = Field(default_factory=WbServer)
    hot: Hot = Field(default_factory=Hot)
    cold: Cold = Field(default_factory=Cold)
    stream: Stream | None = None
    sweep: dict[str, SweepAxis] = Field(default_factory=dict)
    repetitions: int = Field(1, ge=1, le=1000)
    warmup_s: float = Field(1.0, ge=0, le=MAX_WAIT_S)
    duration_s: float = Field(5.0, gt=0, le=MAX_DURATION_S)
    cpus: Cpus = Field(default_factory=Cpus)
    profile: bool = False
    # In-kernel time of the server's system calls and of the network softirqs, timed inside
    # the kernel by wb-ktrace (eBPF) over each point's window: the kernel_* columns (and,
    # where the kernel allows fentry, the papers' functions: kernel_fn_*). Off by
    # default: it costs the server CPU on every system call and context switch
    # (docs/bench-ktrace.md); where the machine cannot run it the columns are null.
    kernel_trace: bool = False
    # Repetition rounds: every point once per round, so a noisy minute on a shared machine
    # hits one repetition of many points, not every repetition of one. "grouped" runs each
    # point's repetitions back to back; "shuffled" also shuffles each round (seeded).
    order: Literal["interleaved", "grouped", "shuffled"] = "interleaved"
    order_seed: int = Field(1, ge=0, le=2**63 - 1)
    # Re-measure a point × repetition invalid only for interference (steal, a crowded CPU)
    # up to this many times; every attempt stays in its raw directory.
    interference_retries: int = Field(0, ge=0, le=10)
    # Before each point × repetition, wait up to this long for the server's and the
    # generator's CPUs to be free of other tasks (harness/runner/quiet.py); 0: do not wait
    quiet_wait_s: float = Field(0.0, ge=0, le=MAX_WAIT_S)
    # Keep the server and its cold connections running from one point to the next of the
    # same round when the two differ only in hot.* (harness/runner/held.py): a sweep of hot
    # rates over thousands of cold connections then opens them once per server, not once
    # per rate (their ramp is slow over a WAN). Each point still has its own hot generator,
    # window, samplers and check that the cold connections are held.
    hold_server_across_hot: bool = False
    # `wanbench run --kernel IMAGE`'s virtual machine; None: the defaults of Guest
    guest: Guest | None = None
    # metric column -> bound each point's median over valid repetitions must keep, checked
    # after the run (`wanbench run` exits 99 when one is crossed, as k6 does)
    thresholds: Annotated[dict[str, Threshold], AfterValidator(check_threshold_metrics)] = \
        Field(default_factory=dict)

    @model_validator(mode="after")
    def _overload_can_keep_offering(self) -> Scenario:
        hot = self.hot
        check_sclient_overload(hot.overload, generator=hot.generator, hot_conns=hot.conns,
                               rate_rps=hot.rate_rps, requests_per_conn=hot.requests_per_conn,
                               connect_timeout_s=hot.connect_timeout_s,
                               response_timeout_s=hot.response_timeout_s,
                               warmup_s=self.warmup_s)
        # each point is validated again with its sweep values applied (and no sweep)
        swept = {path.strip() for key in self.sweep for path in key.split(JOINT)}
        if (hot.overload == "sclient" and hot.rate_rps is None
                and not swept & {"hot", "hot.rate_rps"}):
            raise ValueError("hot.overload: sclient opens one socket per scheduled send: give "
                             "hot.rate_rps (or sweep it)")
        return self

    @model_validator(mode="after")
    def _stream_sender_can_send(self) -> Scenario:
        if self.stream and self.stream.sender == "server" and not isinstance(self.server,
                                                                            WbServer):
            raise ValueError(f"stream.sender: server needs wb-server, which sends the stream "
                             f"(--source); {self.server.name} does not: fix: server: "
                             f"{{kind: wb-server}}, or stream.sender: generator")
        return self

    @model_validator(mode="after")
    def _held_in_rounds(self) -> Scenario:
        if self.hold_server_across_hot and self.order != "interleaved":
            raise ValueError(f"hold_server_across_hot: true keeps a server for the next point "
                             f"of its round that differs only in hot.*, and order: "
                             f"{self.order} does not run such points one after another; fix: "
                             f"order: interleaved, or hold_server_across_hot: false")
        return self


# Sweep axes whose points.parquet column has a conventional name (docs/results-format.md).
COLUMN_OF_PATH = {
    "server.dispatch": "dispatch",
    "server.accept": "accept",
    "server.reply_bytes": "reply_bytes",
    "server.workers": "workers",
    "hot.conns": "hot_conns",
    "hot.rate_rps": "offered_rate_rps",
    "hot.generator": "generator",
    "cold.conns": "cold_conns",
    "stream.conns": "stream_conns",
    "stream.mbps": "stream_mbps",
    "cpus.server_budget_pct": "server_budget_pct",
    "cpus.budget_period_us": "budget_period_us",
}


@dataclass(frozen=True)
class Point:
    """One cell of the sweep grid: the scenario with the sweep values applied."""

    point_id: str
    index: int
    config: Scenario
    axis_values: dict[str, Any]  # sweep path -> value
    columns: dict[str, Any]  # parameter columns for points.parquet
    swept: tuple[str, ...] = ()  # those of columns the sweep sets, in its order

    @property
    def sweep_values(self) -> dict[str, Any]:
        """The sweep's columns and their values here, e.g. {dispatch: select, cold_conns: 0}."""
        return {column: self.columns[column] for column in self.swept}

    @property
    def topology_key(self) -> str:
        return json.dumps(self.config.topology.model_dump(), sort_keys=True)

    @property
    def server_key(self) -> str:
        """The point's configuration less its hot load: points with the same one may run on
        one server and its cold connections (hold_server_across_hot)."""
        return json.dumps(self.config.model_dump(mode="json", exclude={"hot"}), sort_keys=True)


def parameter_columns(config: Scenario, extra: dict[str, Any]) -> dict[str, Any]:
    """A point's parameter columns: harness.results.format.PARAMETER_COLUMNS, in its order
    (tests/runner/test_results.py holds the two together), then the sweep's own."""
    server = config.server
    wb = isinstance(server, WbServer)
    columns: dict[str, Any] = {
        "server": "wb-server" if wb else server.name,
        "dispatch": server.dispatch if wb else None,
        "accept": server.accept if wb else None,
        "reply_bytes": server.reply_bytes,
        "workers": server.workers if wb else None,
        # A stream scenario has no hot request load: its hot columns stay empty.
        "hot_conns": None if config.stream else config.hot.conns,
        "cold_conns": config.cold.conns,
        "offered_rate_rps": None if config.stream else config.hot.rate_rps,
        "one_way_delay_ms": None,
        "generator": config.hot.generator,
        "stream_conns": config.stream.conns if config.stream else None,
        "stream_mbps": config.stream.mbps if config.stream else None,
    }
    columns.update(extra)
    return columns


# Sections whose keys are dotted paths themselves: `--set sweep.cold.conns=[0, 500]` sets
# the axis `cold.conns`.
DOTTED = ("topology.set", "sweep")


def _check_axis_path(scenario: Scenario, path: str) -> None:
    if path.startswith("topology.set.") and len(path) > len("topology.set."):
        return
    model: Any = scenario
    for key in path.split("."):
        fields = type(model).model_fields if isinstance(model, BaseModel) else {}
        if key not in fields or key == "sweep":
            allowed = sorted(k for k in fields if k != "sweep")
            raise ValueError(f"sweep axis {quote(path)}: {quote(key)} is not a field here; "
                             f"{choices(key, allowed, 'allowed')} (topology overrides: "
                             f"topology.set.KEY)")
        model = getattr(model, key)


# Several paths joined by commas vary together: each value is a list, one item per path, so
# a sweep can take the combinations a paper ran rather than the whole grid of them.
JOINT = ","


def _axes(scenario: Scenario) -> list[tuple[tuple[str, ...], list[tuple[Any, ...]], str | None]]:
    """Each sweep axis: its paths, its levels (a value per path), its column alias."""
    counts = [axis.count() if isinstance(axis, Range) else
              len(axis if isinstance(axis, list) else axis.values)
              for axis in scenario.sweep.values()]
    runs = math.prod(counts) * scenario.repetitions
    if runs > MAX_POINT_RUNS:
        raise ValueError(f"the sweep is {' × '.join(f'{c:,.0f}' for c in counts)} points × "
                         f"{scenario.repetitions} repetitions = {runs:,.0f}; at most "
                         f"{MAX_POINT_RUNS:,}; fix: fewer levels or repetitions")
    axes = []
    for key, axis in scenario.sweep.items():
        paths = tuple(part.strip() for part in key.split(JOINT))
        for path in paths:
            _check_axis_path(scenario, path)
        if len(paths) == 1:
            values = (axis if isinstance(axis, list) else
                      axis.values() if isinstance(axis, Range) else axis.values)
            axes.append((paths, [(value,) for value in values],
                         None if isinstance(axis, list) else axis.as_))
            continue
        if not isinstance(axis, list) or not all(
                isinstance(level, list) and len(level) == len(paths) for level in axis):
            raise ValueError(f"sweep axis {key!r}: paths joined by commas vary together; give "
                             f"a list of levels, each a list of {len(paths)} values (one per "
                             f"path), e.g. [[252, 1], [6000, 1]]")
        axes.append((paths, [tuple(level) for level in axis], None))
    return axes


def _column_name(path: str, alias: str | None) -> str:
    return alias or COLUMN_OF_PATH.get(path) or path.removeprefix("topology.set.").replace(".", "_")


def lateness_changes(scenario: Scenario) -> list[str]:
    """How the scenario's points change the late-sends rule's limits, one sentence per
    distinct change (clients.validity.Lateness.changed); empty when every point keeps the
    defaults. The manifest keeps them and every table of the run's points prints them."""
    said = (p.config.hot.lateness.changed(p.config.hot.generator) for p in points(scenario)
            if p.config.stream is None)
    return list(dict.fromkeys(s for s in said if s))


def points(scenario: Scenario) -> list[Point]:
    """Expand the sweep into points; every point is re-validated with its values applied."""
    axes = _axes(scenario)
    base = scenario.model_dump(by_alias=True, exclude={"sweep"})
    result = []
    for index, combo in enumerate(itertools.product(*(levels for _, levels, _ in axes))):
        data = copy.deepcopy(base)
        axis_values = {}
        extra_columns = {}
        swept: list[str] = []
        for (paths, _, alias), level in zip(axes, combo, strict=True):
            for path, value in zip(paths, level, strict=True):
                origin = f"sweep axis {quote(path)}"
                set_path(data, Override(split_key(path, DOTTED, origin), value, origin), Scenario)
                axis_values[path] = value
                if isinstance(value, dict) and alias is None:
                    # a whole section (e.g. `server`): its parameter columns say it
                    if path in PARAMETER_COLUMNS:
                        swept.append(path)
                    continue
                extra_columns[_column_name(path, alias)] = value
                swept.append(_column_name(path, alias))
        try:
            config = Scenario.model_validate(data)
        except ValidationError as exc:
            found = problems(exc, Scenario, data)
            shown = ", ".join(f"{path}={quote(value)}" for path, value in axis_values.items())
            raise SweepPointError(f"sweep point {shown}: {summary([str(p) for p in found])}",
                                  _blamed(scenario, axes, combo, found[0].path)) from None
        digest = hashlib.sha1(json.dumps(axis_values, sort_keys=True, default=str).encode())
        result.append(Point(digest.hexdigest()[:10], index, config, axis_values,
                            parameter_columns(config, extra_columns), tuple(swept)))
    return result


def _blamed(scenario: Scenario, axes: list, combo: tuple, field: tuple[Any, ...]
            ) -> tuple[Any, ...]:
    """The document path of the sweep value that set field (or holds it): its level's own
    line for a list axis, the axis for a range or values, the sweep when none did."""
    dotted = ".".join(map(str, field))
    for key, (paths, levels, _), level in zip(scenario.sweep, axes, combo, strict=True):
        if any(dotted == p or dotted.startswith(p + ".") or p.startswith(dotted + ".")
               for p in paths):
            listed = isinstance(scenario.sweep[key], list)
            return ("sweep", key, levels.index(level)) if listed else ("sweep", key)
    return ("sweep",)


def sweep_columns(scenario: Scenario) -> list[str]:
    """Names of the parameter columns that vary across points."""
    if not scenario.sweep:
        return []
    first = points(scenario)[0]
    names = [_column_name(path, alias) for paths, _, alias in _axes(scenario) for path in paths]
    return [n for n in names if n in first.columns]


# --- loading with file:line errors -----------------------------------------------------------

def parse(text: str, source: str = "<scenario>", overrides: list[str] | None = None) -> Scenario:
    """Parse and validate scenario text; raise ScenarioError naming file:line and field."""
    try:
        return _validated(Document.parse(text, source, "scenario"), overrides)[0]
    except YamlError as exc:
        raise ScenarioError(str(exc)) from None


def load(path: Path, overrides: list[str] | None = None) -> Scenario:
    """Read, validate and expand a scenario file, and load every topology its points use."""
    named = path.with_name(path.name + ".yaml")
    if not path.exists() and path.suffix != ".yaml" and named.is_file():
        raise ScenarioError(f"no scenario {path}; did you mean {named}?")
    try:
        document = Document.load(path, "scenario")
        scenario, grid = _validated(document, overrides)
        _check_topologies(grid, document, path.parent)
    except YamlError as exc:
        raise ScenarioError(str(exc)) from None
    return scenario


def recorded(manifest: dict[str, Any], where: str) -> Scenario:
    """The scenario a run's manifest (read from where) recorded: exactly what was run,
    validated when it ran; ResultsFormatError when it is missing or no longer validates
    (damaged, or edited since)."""
    if manifest.get("scenario") is None:
        raise ResultsFormatError(f"{where}: no \"scenario\": not a run's manifest; restore "
                                 f"it from a copy, or start a new run")
    try:
        return Scenario.model_validate(manifest["scenario"])
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ResultsFormatError(
            f"{where}: scenario.{'.'.join(map(str, first['loc']))}: {first['msg']}: the "
            f"recorded scenario is damaged; restore the manifest from a copy, or start a new "
            f"run") from None


def _validated(document: Document, overrides: list[str] | None) -> tuple[Scenario, list[Point]]:
    """The scenario with its `--set`s applied, and its grid of points (each validated)."""
    for text in overrides or []:
        document.apply(Override.parse(text, DOTTED), Scenario)
    scenario = document.validate(Scenario)
    try:
        return scenario, points(scenario)
    except SweepPointError as exc:
        raise YamlError(f"{document.where(exc.blamed)}: {exc}") from None
    except ValueError as exc:  # the sweep's own shape (sizes, axis paths)
        raise YamlError(f"{document.where(('sweep',))}: {exc}") from None


def _check_topologies(grid: list[Point], document: Document, base: Path) -> None:
    """Each topology a point uses loads (its own file:line on a problem): a bad one is refused
    before anything starts, not when the sweep reaches it."""
    where = document.where(("topology",))
    checked = set()
    for point in grid:
        if point.topology_key in checked:
            continue
        checked.add(point.topology_key)
        ref = point.config.topology
        swept = {k: v for k, v in point.axis_values.items() if k.startswith("topology")}
        context = f"sweep point {quote(swept)}: " if swept else ""
        try:
            path = ref.path(base)
        except ValueError as exc:
            raise YamlError(f"{where}: {context}topology.file: {exc}") from None
        try:
            load_topology(path, ref.set)
        except TopologyError as exc:
            raise YamlError(f"{where}: {context}topology: {exc}") from None
