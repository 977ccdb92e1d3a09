"""Scenario YAML: the validated experiment description and its grid of sweep points."""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from clients.paths import REPO_ROOT
from clients.spec import GENERATORS, MAX_CONNS, check_sclient_only
from clients.targets import check_request_path
from harness.cgroups import MAX_PERIOD_US, MIN_PERIOD_US, check_budget
from harness.servers import (
    DISPATCHES,
    MAX_REPLY_BYTES,
    MAX_WORKERS,
    check_accept,
    check_rt_signal_queue,
)
from harness.topology.backend_probe import BACKENDS


class ScenarioError(ValueError):
    """A scenario that cannot be run; the message names file:line, field and allowed values."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TopologyRef(Strict):
    file: str = "topologies/loopback.yaml"
    backend: Literal[BACKENDS] = "auto"  # type: ignore[valid-type]
    set: dict[str, bool | str | int | float] = Field(default_factory=dict)

    def path(self, base: Path) -> Path:
        for candidate in (base / self.file, REPO_ROOT / self.file):
            if candidate.is_file():
                return candidate
        raise ValueError(f"topology file {self.file!r} not found (looked beside the scenario "
                         f"and in {REPO_ROOT})")


class WbServer(Strict):
    kind: Literal["wb-server"] = "wb-server"
    dispatch: Literal[DISPATCHES] = "epoll"  # type: ignore[valid-type]
    accept: str = "multi"
    reply_bytes: int = Field(92, ge=0, le=MAX_REPLY_BYTES)
    workers: int = Field(1, ge=1, le=MAX_WORKERS)
    backlog: int | None = Field(None, ge=1)
    port: int = Field(8080, ge=1, le=65535)
    # RLIMIT_SIGPENDING for the server; the papers' Linux 2.4 queued at most 1024 RT signals
    rt_signal_queue: int | None = None

    @field_validator("rt_signal_queue")
    @classmethod
    def _rt_signal_queue(cls, value: int | None) -> int | None:
        return None if value is None else check_rt_signal_queue(value)

    @field_validator("accept", mode="before")
    @classmethod
    def _accept(cls, value: Any) -> str:
        return check_accept(str(value))  # YAML reads `accept: 4` as a number


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


class ExternalServer(Strict):
    """Any server started by a command, e.g. nginx; ready when its port accepts.

    Its command runs as root, as written; its files land in the run's work directory."""

    kind: Literal["external"]
    name: str
    command: list[str] = Field(min_length=1)
    files: dict[str, str] = Field(default_factory=dict)
    port: int = Field(ge=1, le=65535)
    reply_bytes: int | None = None
    ready_timeout_s: float = Field(10.0, gt=0)

    @field_validator("files")
    @classmethod
    def _files(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            check_file_name(name)
        return value

    @model_validator(mode="after")
    def _templates_fill(self) -> ExternalServer:
        self.render(Path("/workdir"), "198.18.0.1")  # a template that cannot fill fails here
        return self

    def render(self, workdir: Path, address: str) -> tuple[dict[Path, str], list[str]]:
        """The files to write (each inside workdir) and the argv, with {workdir}, {address},
        {port}, {reply_bytes} and {body} filled in."""
        fields = {"workdir": workdir, "address": address, "port": self.port,
                  "reply_bytes": self.reply_bytes or 0, "body": "x" * (self.reply_bytes or 0)}

        def fill(template: str, where: str) -> str:
            try:
                return template.format(**fields)
            except KeyError as e:
                raise ValueError(f"{where} uses {{{e.args[0]}}}, which is not one of "
                                 f"{', '.join('{' + f + '}' for f in fields)}; fix: use one of "
                                 f"those, or write a literal brace as {{{{ or }}}}") from None
            except (ValueError, IndexError) as e:
                raise ValueError(f"{where} is not a valid template ({e}); fix: write a literal "
                                 f"brace as {{{{ or }}}}") from None

        files = {workdir / check_file_name(name): fill(text, f"files.{name}")
                 for name, text in self.files.items()}
        if any(path.parent != workdir for path in files):  # check_file_name's promise, kept
            raise ValueError("a file name leaves the work directory")
        return files, [fill(arg, f"command[{i}]") for i, arg in enumerate(self.command)]


class Hot(Strict):
    generator: Literal[GENERATORS] = "sclient"  # type: ignore[valid-type]
    conns: int = Field(10, ge=0, le=MAX_CONNS)
    rate_rps: float | None = Field(None, gt=0)
    arrivals: Literal["fixed", "poisson"] = "fixed"
    requests_per_conn: int | None = Field(None, ge=1)
    # sclient, open loop: "random" spreads sends over every connection, so each one sends
    # now and then and the idle set keeps changing (CM01's periodic connections)
    pick: Literal["last", "random"] = "last"
    path: str = "/"
    connect_timeout_s: float = Field(2.0, gt=0)
    response_timeout_s: float = Field(5.0, gt=0)
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
    conns: int = Field(0, ge=0, le=MAX_CONNS)
    ramp_rps: float = Field(20_000, gt=0)
    interval_s: float | None = Field(None, gt=0)


class Stream(Strict):
    conns: int = Field(ge=1, le=MAX_CONNS)
    mbps: float = Field(gt=0)


class Cpus(Strict):
    server: int = Field(0, ge=0)
    generator: int = Field(1, ge=0)
    # The server's share of its CPU (cgroup CPU bandwidth, harness/cgroups.py): a slower
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


class Guest(Strict):
    """The virtual machine of `wanbench run --kernel IMAGE` (harness/guest): its size and
    which host CPUs its vCPU threads are pinned to. The host's own kernel ignores it."""

    cpus: int = Field(2, ge=1, le=64)
    memory_mb: int = Field(2048, ge=512, le=262_144)
    # host CPUs for the vCPU threads, one each (vng --pin); None leaves them unpinned
    pin: list[int] | None = None
    # the whole guest run, boot to power-off: past it the guest is killed as hung
    timeout_s: float = Field(1800, gt=0)

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


class Range(Strict):
    start: float
    stop: float
    step: float
    as_: str | None = Field(None, alias="as")

    @model_validator(mode="after")
    def _step(self) -> Range:
        if self.step <= 0 or self.stop < self.start:
            raise ValueError("a range needs step > 0 and stop >= start")
        return self

    def values(self) -> list[Any]:
        count = int((self.stop - self.start) / self.step + 1e-9) + 1
        values = [self.start + i * self.step for i in range(count)]
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
    if isinstance(value, dict):
        return "values" if "values" in value else "range"
    return "list"


SweepAxis = Annotated[
    Annotated[list[Any], Field(min_length=1), Tag("list")]
    | Annotated[Range, Tag("range")]
    | Annotated[Values, Tag("values")],
    Discriminator(_axis_kind),
]


class Scenario(Strict):
    name: str

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", value):
            raise ValueError(f"name {value!r} is not allowed; use lowercase letters, digits "
                             f"and - _ . (it names the results directory)")
        return value
    description: str = ""
    topology: TopologyRef = Field(default_factory=TopologyRef)
    server: ServerSpec = Field(default_factory=WbServer)
    hot: Hot = Field(default_factory=Hot)
    cold: Cold = Field(default_factory=Cold)
    stream: Stream | None = None
    sweep: dict[str, SweepAxis] = Field(default_factory=dict)
    repetitions: int = Field(1, ge=1, le=1000)
    warmup_s: float = Field(1.0, ge=0)
    duration_s: float = Field(5.0, gt=0)
    cpus: Cpus = Field(default_factory=Cpus)
    profile: bool = False
    # In-kernel time of the server's system calls and of the network softirqs, timed inside
    # the kernel by wb-ktrace (eBPF) over each point's window: the kernel_* columns. Off by
    # default: it costs the server CPU on every system call and context switch
    # (docs/bench-ktrace.md); where the machine cannot run it the columns are null.
    kernel_trace: bool = False
    # Repetition rounds: every point once per round, so a noisy minute on a shared machine
    # hits one repetition of many points, not every repetition of one. "grouped" runs each
    # point's repetitions back to back; "shuffled" also shuffles each round (seeded).
    order: Literal["interleaved", "grouped", "shuffled"] = "interleaved"
    order_seed: int = 1
    # Re-measure a point × repetition invalid only for interference (steal, a crowded CPU)
    # up to this many times; every attempt stays in its raw directory.
    interference_retries: int = Field(0, ge=0, le=10)
    # `wanbench run --kernel IMAGE`'s virtual machine; None: the defaults of Guest
    guest: Guest | None = None


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

    @property
    def topology_key(self) -> str:
        return json.dumps(self.config.topology.model_dump(), sort_keys=True)


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


def _set_path(data: dict[str, Any], path: str, value: Any) -> None:
    # Sweep axes and topology overrides are named by dotted paths themselves.
    for prefix, keys in (("topology.set.", ("topology", "set")), ("sweep.", ("sweep",))):
        if path.startswith(prefix):
            node = data
            for key in keys:
                node = node.setdefault(key, {})
            node[path.removeprefix(prefix)] = value
            return
    keys = path.split(".")
    node = data
    for key in keys[:-1]:
        child = node.get(key)
        if child is None:
            child = node[key] = {}
        node = child
    node[keys[-1]] = value


def _check_axis_path(scenario: Scenario, path: str) -> None:
    if path.startswith("topology.set.") and len(path) > len("topology.set."):
        return
    model: Any = scenario
    for key in path.split("."):
        fields = type(model).model_fields if isinstance(model, BaseModel) else {}
        if key not in fields or key == "sweep":
            allowed = ", ".join(sorted(k for k in fields if k != "sweep")) or "(none)"
            raise ValueError(f"sweep axis {path!r}: {key!r} is not a field here; "
                             f"allowed: {allowed} (topology overrides: topology.set.KEY)")
        model = getattr(model, key)


# Several paths joined by commas vary together: each value is a list, one item per path, so
# a sweep can take the combinations a paper ran rather than the whole grid of them.
JOINT = ","


def _axes(scenario: Scenario) -> list[tuple[tuple[str, ...], list[tuple[Any, ...]], str | None]]:
    """Each sweep axis: its paths, its levels (a value per path), its column alias."""
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


def points(scenario: Scenario) -> list[Point]:
    """Expand the sweep into points; every point is re-validated with its values applied."""
    axes = _axes(scenario)
    base = scenario.model_dump(by_alias=True, exclude={"sweep"})
    result = []
    for index, combo in enumerate(itertools.product(*(levels for _, levels, _ in axes))):
        data = copy.deepcopy(base)
        axis_values = {}
        extra_columns = {}
        for (paths, _, alias), level in zip(axes, combo, strict=True):
            for path, value in zip(paths, level, strict=True):
                _set_path(data, path, value)
                axis_values[path] = value
                if isinstance(value, dict) and alias is None:
                    continue  # a whole section (e.g. `server`): its parameter columns say it
                extra_columns[_column_name(path, alias)] = value
        try:
            config = Scenario.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = _field_name(tuple(first["loc"]))
            raise ScenarioError(f"sweep point {axis_values}: {where}: "
                                f"{_describe(first, tuple(first['loc']))}") from None
        digest = hashlib.sha1(json.dumps(axis_values, sort_keys=True, default=str).encode())
        result.append(Point(digest.hexdigest()[:10], index, config, axis_values,
                            parameter_columns(config, extra_columns)))
    return result


def sweep_columns(scenario: Scenario) -> list[str]:
    """Names of the parameter columns that vary across points."""
    if not scenario.sweep:
        return []
    first = points(scenario)[0]
    names = [_column_name(path, alias) for paths, _, alias in _axes(scenario) for path in paths]
    return [n for n in names if n in first.columns]


# --- loading with file:line errors -----------------------------------------------------------

def _line_index(node: yaml.Node, path: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], int]:
    """Map each key path in a composed YAML document to its 1-based line."""
    lines = {path: node.start_mark.line + 1}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            child = path + (key_node.value,)
            lines.update(_line_index(value_node, child))
            lines[child] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines.update(_line_index(item, path + (i,)))
    return lines


def _line_of(lines: dict[tuple[Any, ...], int], loc: tuple[Any, ...]) -> int:
    # pydantic inserts union-member tags (e.g. 'wb-server', 'list[any]') into loc: drop
    # components that are not in the document until a known path matches.
    parts = [p for p in loc]
    while parts:
        key = tuple(parts)
        if key in lines:
            return lines[key]
        for i in range(len(parts) - 1, -1, -1):
            if tuple(parts[:i]) in lines and tuple(parts[:i] + parts[i + 1:]) in lines:
                return lines[tuple(parts[:i] + parts[i + 1:])]
        parts.pop()
    return lines.get((), 1)


_UNION_TAGS = {"wb-server", "external", "list", "range", "values"}


def _is_tag(loc: tuple[Any, ...], i: int) -> bool:
    """pydantic puts the union member's tag after `server` and after a sweep axis name."""
    return loc[i] in _UNION_TAGS and i > 0 and (
        loc[i - 1] == "server" or (i >= 2 and loc[i - 2] == "sweep"))


def _field_name(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for i, p in enumerate(loc)
                    if not _is_tag(loc, i) and not str(p).startswith("function-"))


def _fields_at(loc: tuple[Any, ...]) -> list[str]:
    """Field names allowed beside the last element of an error location."""
    model: Any = Scenario
    for i, key in enumerate(loc[:-1]):
        if _is_tag(loc, i):
            model = {"wb-server": WbServer, "external": ExternalServer,
                     "range": Range, "values": Values}.get(key, model)
            continue
        if i >= 1 and loc[i - 1] == "sweep":
            continue
        field = model.model_fields.get(key)
        annotation = field.annotation if field else None
        members = [a for a in getattr(annotation, "__args__", (annotation,))
                   if isinstance(a, type) and issubclass(a, BaseModel)]
        model = members[0] if members else model
    return sorted(f.alias or name for name, f in model.model_fields.items())


def _describe(error: dict[str, Any], loc: tuple[Any, ...]) -> str:
    if error["type"] == "extra_forbidden":
        return f"unknown field; allowed here: {', '.join(_fields_at(loc))}"
    if error["type"] == "missing":
        return "required field is missing"
    return error["msg"].removeprefix("Value error, ")


def parse(text: str, source: str = "<scenario>", overrides: list[str] | None = None) -> Scenario:
    """Parse and validate scenario text; raise ScenarioError naming file:line and field."""
    try:
        node = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else 1
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(f"{source}:{line}: not valid YAML: {problem}") from None
    if not isinstance(data, dict) or node is None:
        raise ScenarioError(f"{source}:1: a scenario is a YAML mapping with at least `name:`")
    for item in overrides or []:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ScenarioError(f"--set {item!r}: expected KEY=VALUE, e.g. cold.conns=1000")
        _set_path(data, key, yaml.safe_load(raw))
    lines = _line_index(node)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        messages = []
        for error in exc.errors():
            loc = tuple(error["loc"])
            field = _field_name(loc)
            messages.append(f"{source}:{_line_of(lines, loc)}: {field}: "
                            f"{_describe(error, loc)}")
        raise ScenarioError("\n".join(dict.fromkeys(messages))) from None
    try:
        points(scenario)
    except (ValueError, ScenarioError) as exc:
        line = lines.get(("sweep",), 1)
        raise ScenarioError(f"{source}:{line}: {exc}") from None
    return scenario


def load(path: Path, overrides: list[str] | None = None) -> Scenario:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read scenario: {exc.strerror}") from None
    scenario = parse(text, str(path), overrides)
    try:
        scenario.topology.path(path.parent)
    except ValueError as exc:
        line = _line_index(yaml.compose(text)).get(("topology",), 1)
        raise ScenarioError(f"{path}:{line}: topology.file: {exc}") from None
    return scenario
