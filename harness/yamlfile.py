"""The one YAML loader of scenarios and topologies: read, parse, override, validate.

Files may come from anyone, and wanbench runs as root, so reading one is bounded: regular
files only (a FIFO or /proc/kmsg would block), at most MAX_FILE_BYTES, at most MAX_DEPTH
levels deep and MAX_NODES nodes with every alias expanded (a "billion laughs" file is a few
lines), no duplicate keys (the last one would silently win), no explicit tags (`!!binary`
makes bytes of text, `!!python/…` would name code; the values wanted are plain). Every
problem is one line naming where it is (file:line, or the `--set` that caused it), the field
and the fix, and quotes at most QUOTE_CHARS characters of any text it repeats from the file."""

from __future__ import annotations

import difflib
import errno
import os
import re
import stat
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Tag, ValidationError

MAX_FILE_BYTES = 1 << 20  # the shipped scenarios and topologies are 0.3-2.5 KB
MAX_DEPTH = 32  # nesting levels; the shipped files nest at most 5
MAX_NODES = 50_000  # with aliases expanded: enough for a 10,000-point sweep's values
QUOTE_CHARS = 60  # of a file's own text in an error message
MAX_PROBLEMS = 3  # named in one message; the rest are counted

M = TypeVar("M", bound=BaseModel)


class YamlError(ValueError):
    """A file or override that cannot be used: one line, where, what, and the fix."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))  # one line, whatever was quoted


class Strict(BaseModel):
    """The base of every model a YAML file fills: unknown fields are refused, and so are
    infinite and NaN numbers (`.inf` seconds would run forever)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def quote(value: Any) -> str:
    """repr(value) cut to QUOTE_CHARS characters: an error never repeats much of a file."""
    text = repr(value)
    return text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS - 1] + "…"


def choices(name: Any, allowed: list[str], label: str = "allowed here") -> str:
    """'allowed here: a, b, c', then the nearest of them when one is close to name."""
    return f"{label}: {', '.join(allowed) or 'nothing'}{nearest(name, allowed)}"


def nearest(name: Any, allowed: Sequence[str]) -> str:
    """'; did you mean b?' when one of allowed is close to name, else ''."""
    near = difflib.get_close_matches(str(name), allowed, n=1)
    return f"; did you mean {near[0]}?" if near else ""


# --- reading ---------------------------------------------------------------------------------

def read_text(path: Path, what: str) -> str:
    """The text of a regular file of at most MAX_FILE_BYTES, as UTF-8.

    Opened without blocking and checked again on the open descriptor (what is at the path
    may change in between); only st_size bytes are read, so a kernel file that reports no
    size (/proc/kmsg) reads as empty instead of waiting for data."""
    try:
        _check_regular(os.stat(path).st_mode, path, what)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        try:
            info = os.fstat(fd)
            _check_regular(info.st_mode, path, what)
            if info.st_size > MAX_FILE_BYTES:
                raise YamlError(f"{path}: {info.st_size:,} bytes; a {what} file is at most "
                                f"{MAX_FILE_BYTES:,}")
            data = _read_exactly(fd, info.st_size)
        finally:
            os.close(fd)
    except OSError as exc:
        reason = ("it would block" if exc.errno == errno.EAGAIN
                  else exc.strerror or type(exc).__name__)
        raise YamlError(f"cannot read {what} {path}: {reason}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise YamlError(f"{path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x}); a "
                        f"{what} file is YAML text") from None


def _check_regular(mode: int, path: Path, what: str) -> None:
    if stat.S_ISREG(mode):
        return
    kind = ("a directory" if stat.S_ISDIR(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "a special file")
    raise YamlError(f"{path}: {kind}, not a regular file; fix: give a {what} file")


def _read_exactly(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left > 0:
        chunk = os.read(fd, left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# --- parsing ---------------------------------------------------------------------------------

class _Refused(yaml.MarkedYAMLError):
    def __init__(self, problem: str, mark: yaml.Mark) -> None:
        super().__init__(problem=problem, problem_mark=mark)


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses deep nesting, alias bombs, recursive aliases, duplicate keys,
    and values Python cannot build (a 5,000-digit integer), each at its line."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._depth = 0
        self._nodes = 0  # composed so far, each alias counted as what it repeats
        self._expanded: dict[int, int] = {}  # finished node -> nodes it stands for

    def _count(self, nodes: int, mark: yaml.Mark) -> None:
        self._nodes += nodes
        if self._nodes > MAX_NODES:
            raise _Refused(f"more than {MAX_NODES:,} values once aliases are expanded; fix: "
                           f"fewer values, or fewer aliases that repeat large parts", mark)

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        tag = getattr(event, "tag", None)
        if tag is not None and tag != "!":  # "!": the non-specific tag of a quoted string
            raise _Refused(f"tag {quote(tag)}: a scenario or topology is plain YAML (strings, "
                           f"numbers, lists, mappings); fix: remove the tag", event.start_mark)
        if isinstance(event, yaml.AliasEvent):
            target = self.anchors.get(event.anchor)
            if target is not None and id(target) not in self._expanded:
                raise _Refused(f"alias *{event.anchor} repeats its own anchor &{event.anchor} "
                               f"(a loop); fix: refer to a finished anchor", event.start_mark)
            node = super().compose_node(parent, index)
            self._count(self._expanded[id(node)], event.start_mark)
            return node
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _Refused(f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
        before = self._nodes
        self._count(1, event.start_mark)
        node = super().compose_node(parent, index)
        self._depth -= 1
        self._expanded[id(node)] = self._nodes - before
        return node

    def compose_mapping_node(self, anchor: str | None) -> yaml.MappingNode:
        node = super().compose_mapping_node(anchor)
        first: dict[tuple[str, str], yaml.Node] = {}
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                continue
            seen = first.setdefault((key.tag, key.value), key)
            if seen is not key:
                raise _Refused(f"key {quote(key.value)} appears twice in one mapping (lines "
                               f"{seen.start_mark.line + 1} and {key.start_mark.line + 1}); "
                               f"fix: keep one", key.start_mark)
        return node

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as exc:
            problem = (f"an integer of {len(str(node.value))} digits is too long"
                       if node.tag == "tag:yaml.org,2002:int" else f"cannot read this value "
                       f"({' '.join(str(exc).split())[:QUOTE_CHARS]})")
            raise _Refused(problem, node.start_mark) from None


class _Unparsed(Exception):
    def __init__(self, line: int, problem: str) -> None:
        super().__init__(problem)
        self.line, self.problem = line, problem


def _parse(text: str) -> tuple[Any, yaml.Node | None]:
    """The data and the composed node tree of one YAML document, within the bounds;
    _Unparsed with the line and the problem."""
    loader = None
    try:
        loader = _BoundedLoader(text)  # its reader checks the characters here
        node = loader.get_single_node()
        data = None if node is None else loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "malformed"
        raise _Unparsed(mark.line + 1 if mark else 1, problem if isinstance(exc, _Refused)
                        else f"not valid YAML: {problem}") from None
    except yaml.YAMLError as exc:  # a ReaderError: a character YAML does not allow
        line = text.count("\n", 0, getattr(exc, "position", 0)) + 1
        raise _Unparsed(line, f"not valid YAML: a control or non-printable character "
                              f"(U+{getattr(exc, 'character', 0):04X})") from None
    finally:
        if loader is not None:
            loader.dispose()
    return data, node


# --- overrides -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Override:
    """A value set over a document's, e.g. from `--set cold.conns=1000`, and how it was
    written (errors it causes name it)."""

    path: tuple[str, ...]
    value: Any
    origin: str

    @classmethod
    def parse(cls, text: str, dotted: tuple[str, ...] = ()) -> Override:
        """`--set KEY=VALUE`: VALUE is YAML; under a `dotted` section (e.g. `sweep`) the
        rest of KEY is one key, a dotted path itself."""
        origin = f"--set {quote(text)}"
        key, value = split_assignment(text)
        return cls(split_key(key, dotted, origin), parse_value(value, origin), origin)

    @classmethod
    def of(cls, key: str, value: Any, origin: str) -> Override:
        """A dotted key and its value; a value given as text is read as YAML."""
        return cls(split_key(key, (), origin),
                   parse_value(value, origin) if isinstance(value, str) else value, origin)


def split_assignment(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise YamlError(f"--set {quote(text)}: write KEY=VALUE, e.g. cold.conns=1000")
    return key.strip(), value.strip()


def split_key(key: str, dotted: tuple[str, ...], origin: str) -> tuple[str, ...]:
    for prefix in dotted:
        if key.startswith(prefix + ".") and len(key) > len(prefix) + 1:
            return (*prefix.split("."), key.removeprefix(prefix + "."))
    parts = tuple(key.split("."))
    if not all(parts):
        raise YamlError(f"{origin}: empty part in key {quote(key)}; fix: e.g. cold.conns")
    return parts


def parse_value(text: str, origin: str) -> Any:
    """A value written on the command line, as YAML, within the file's bounds."""
    try:
        return _parse(text)[0]
    except _Unparsed as exc:
        raise YamlError(f"{origin}: {exc.problem}; fix: a YAML value, text in quotes: "
                        f"--set 'KEY=\"TEXT\"'") from None


# --- documents -------------------------------------------------------------------------------

@dataclass
class Document:
    """A YAML mapping read from a file or text, with its overrides; errors name their line."""

    source: str
    data: dict[str, Any]
    root: yaml.Node
    origins: dict[tuple[Any, ...], str] = field(default_factory=dict)  # overridden paths

    @classmethod
    def parse(cls, text: str, source: str, what: str) -> Document:
        try:
            data, node = _parse(text)
        except _Unparsed as exc:
            raise YamlError(f"{source}:{exc.line}: {exc.problem}") from None
        if not isinstance(data, dict) or node is None:
            raise YamlError(f"{source}:1: a {what} is a YAML mapping "
                            f"({'empty' if node is None else 'not a mapping'})")
        return cls(source, data, node)

    @classmethod
    def load(cls, path: Path, what: str) -> Document:
        return cls.parse(read_text(path, what), str(path), what)

    def apply(self, override: Override, model: type[BaseModel]) -> None:
        set_path(self.data, override, model)
        self.origins = {p: o for p, o in self.origins.items()
                        if p[:len(override.path)] != override.path}
        self.origins[override.path] = override.origin

    def where(self, path: tuple[Any, ...]) -> str:
        """file:line of path; or the override that set it or a section above it; or, for a
        section an override set something in (a rule over several fields: the server's and
        the generator's CPUs), that override, then the section's line."""
        for depth in range(len(path), -1, -1):
            if path[:depth] in self.origins:
                return self.origins[path[:depth]]
        line, found = _line(self.root, path)
        below = [o for p, o in self.origins.items() if p[:len(path)] == path]
        if below:
            return f"{below[0]} (in {self.source}:{line})" if found else below[0]
        return f"{self.source}:{line}"

    def validate(self, model: type[M]) -> M:
        try:
            return model.model_validate(self.data)
        except ValidationError as exc:
            raise YamlError(summary([f"{self.where(p.path)}: {p}"
                                     for p in problems(exc, model, self.data)])) from None


def set_path(data: dict[str, Any], override: Override, model: type[BaseModel]) -> None:
    """Set override's value in data, making the sections on its way (a typo in a section's
    name is left for validation to name). Refused: a name missing from a table the user names
    (links.NAME), and a path through a value that is not a section."""
    node: Any = data
    here: Any = model
    for depth, key in enumerate(override.path[:-1]):
        child = node.get(key)
        if child is None:
            if _is_table(here):
                above = ".".join(override.path[:depth])
                raise YamlError(f"{override.origin}: no {quote(key)} under {above}; "
                                f"{choices(key, sorted(map(str, node)), 'known')}")
            child = node[key] = {}
        elif not isinstance(child, dict):
            where = ".".join(override.path[:depth + 1])
            raise YamlError(f"{override.origin}: {where} is a {type(child).__name__}, not a "
                            f"section; fix: set it whole, e.g. {where}=VALUE")
        node, here = child, _step(here, key)
    node[override.path[-1]] = override.value


def _line(node: yaml.Node, path: tuple[Any, ...]) -> tuple[int, bool]:
    """The line of the deepest part of path in the document (a mapping entry: its key's),
    and whether that is all of path."""
    line = node.start_mark.line + 1
    for key in path:
        if isinstance(node, yaml.MappingNode):
            entry = next(((k, v) for k, v in node.value
                          if isinstance(k, yaml.ScalarNode) and k.value == str(key)), None)
            if entry is None:
                return line, False
            line, node = entry[0].start_mark.line + 1, entry[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) \
                and 0 <= key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            return line, False
    return line, True


# --- validation errors -----------------------------------------------------------------------

@dataclass(frozen=True)
class Problem:
    """One field's problem: where it is in the document and what is wrong."""

    path: tuple[Any, ...]
    text: str

    def __str__(self) -> str:
        name = ".".join(str(p) if len(str(p)) <= QUOTE_CHARS else quote(p) for p in self.path)
        return f"{name}: {self.text}" if name else self.text  # the whole document's problem


def problems(exc: ValidationError, model: type[BaseModel], data: Any) -> list[Problem]:
    """pydantic's errors as one Problem per document path, in its order: union members'
    tags taken out of the path, an unknown field's allowed neighbours (and the nearest)."""
    found: dict[tuple[Any, ...], list[str]] = {}
    for error in exc.errors():
        loc = tuple(error["loc"])
        path = _document_path(data, loc, error["type"] == "missing")
        found.setdefault(path, [])
        text = _describe(error, model, loc)
        if text not in found[path]:
            found[path].append(text)
    return [Problem(path, "; ".join(texts)) for path, texts in found.items()]


def summary(messages: list[str]) -> str:
    """At most MAX_PROBLEMS of them on one line, the rest counted."""
    shown = "; ".join(messages[:MAX_PROBLEMS])
    more = len(messages) - MAX_PROBLEMS
    return shown + (f" (and {more} more problem{'s' if more > 1 else ''})" if more > 0 else "")


def _document_path(data: Any, loc: tuple[Any, ...], missing: bool) -> tuple[Any, ...]:
    """loc without what is not in the document: a union member's tag, a validator's name
    (the last element stays when it names a missing field)."""
    path: list[Any] = []
    for i, key in enumerate(loc):
        if isinstance(data, dict) and key in data:
            data = data[key]
        elif isinstance(data, list) and isinstance(key, int) and 0 <= key < len(data):
            data = data[key]
        elif not (missing and i == len(loc) - 1):
            continue
        path.append(key)
    return tuple(path)


# pydantic's wording of a wrong kind of value ("Input should be a valid integer, unable to
# parse string as an integer") in ours: what the field takes.
KIND_WANTED = {
    "int_parsing": "a whole number", "int_type": "a whole number",
    "int_from_float": "a whole number", "float_parsing": "a number", "float_type": "a number",
    "finite_number": "a finite number", "bool_parsing": "true or false",
    "bool_type": "true or false", "string_type": "text, in quotes",
    "model_type": "a section (KEY: VALUE, ...)", "model_attributes_type": "a section",
    "dict_type": "a mapping (KEY: VALUE, ...)", "list_type": "a list ([A, B])",
}


BOUND_WORDS = {"greater_than": "more than", "greater_than_equal": "at least",
               "less_than": "less than", "less_than_equal": "at most"}


def _describe(error: dict[str, Any], model: type[BaseModel], loc: tuple[Any, ...]) -> str:
    if error["type"] == "extra_forbidden":
        return f"unknown field; {choices(loc[-1], _fields_at(model, loc[:-1]))}"
    if error["type"] == "missing":
        return "required field is missing"
    value = error.get("input")
    got = f" (got {quote(value)})" if isinstance(value, str | int | float) else ""
    if error["type"] == "literal_error":
        allowed = re.findall(r"'([^']*)'", str(error.get("ctx", {}).get("expected", "")))
        return f"{quote(value)} is not allowed; {choices(value, allowed, 'allowed')}"
    if error["type"] in KIND_WANTED:
        return f"wants {KIND_WANTED[error['type']]}{got}"
    if error["type"] in BOUND_WORDS:
        (bound,) = error.get("ctx", {}).values()
        return f"must be {BOUND_WORDS[error['type']]} {bound:g}{got}"
    text = error["msg"].removeprefix("Value error, ")
    return text + (got if error["type"] != "value_error" else "")


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The field names of the model at loc (pydantic's, tags and all)."""
    here: Any = model
    for key in loc:
        here = _step(here, key)
    return sorted({f.alias or name for m in _models(here) for name, f in m.model_fields.items()})


def _unwrapped(annotation: Any) -> tuple[Any, str | None]:
    """An annotation without Annotated[...], and its pydantic Tag if it has one."""
    if typing.get_origin(annotation) is typing.Annotated:
        base, *meta = typing.get_args(annotation)
        tags = [m.tag for m in meta if isinstance(m, Tag)]
        return _unwrapped(base)[0], tags[0] if tags else None
    return annotation, None


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _models(annotation: Any) -> list[type[BaseModel]]:
    base, _ = _unwrapped(annotation)
    if _is_union(base):
        return [m for member in typing.get_args(base) for m in _models(member)]
    return [base] if isinstance(base, type) and issubclass(base, BaseModel) else []


def _is_table(annotation: Any) -> bool:
    """A dict whose keys the user names (links, hosts), as opposed to a model's fields."""
    base, _ = _unwrapped(annotation)
    if _is_union(base):
        return any(_is_table(m) for m in typing.get_args(base) if m is not type(None))
    return typing.get_origin(base) is dict


def _step(annotation: Any, key: Any) -> Any:
    """The annotation one element of a pydantic location further in (None: unknown)."""
    base, _ = _unwrapped(annotation)
    if isinstance(base, type) and issubclass(base, BaseModel):
        if str(key).startswith("function-"):  # a validator's name, not a field
            return base
        return next((f.annotation for name, f in base.model_fields.items()
                     if key in (name, f.alias)), None)
    if typing.get_origin(base) is dict:
        return typing.get_args(base)[1]
    if typing.get_origin(base) is list:
        return typing.get_args(base)[0] if isinstance(key, int) else base
    if _is_union(base):
        members = typing.get_args(base)
        tagged = [m for m in members if _unwrapped(m)[1] == key]
        if tagged:
            return tagged[0]
        stepped = [_step(m, key) for m in members if m is not type(None)]
        return next((s for s in stepped if s is not None), None)
    return None
