"""The one YAML loader of scenarios and topologies (harness/yamlfile.py): each bound at its
limit and past it, overrides, and where its errors point."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import pytest

from harness.yamlfile import (
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_NODES,
    Document,
    Override,
    Strict,
    YamlError,
    read_text,
)


def parsed(text: str) -> Document:
    return Document.parse(text, "f.yaml", "scenario")


def nested(levels: int) -> str:
    """A mapping whose value nests `levels` flow sequences: levels + 1 deep."""
    return "a: " + "[" * levels + "]" * levels + "\n"


def test_nesting_to_the_limit_is_read_and_past_it_refused():
    assert parsed(nested(MAX_DEPTH - 1)).data["a"]
    with pytest.raises(YamlError, match=rf"f.yaml:1: nested more than {MAX_DEPTH} levels"):
        parsed(nested(MAX_DEPTH))


def flat_list(items: int) -> str:
    return "a: [" + ", ".join(["0"] * items) + "]\n"  # items + 3 nodes


def test_nodes_to_the_budget_are_read_and_past_it_refused():
    assert len(parsed(flat_list(MAX_NODES - 3)).data["a"]) == MAX_NODES - 3
    with pytest.raises(YamlError, match="aliases are expanded"):
        parsed(flat_list(MAX_NODES - 2))


def test_an_alias_counts_as_what_it_repeats():
    def aliased(items: int) -> str:  # 2 × items + 5 nodes once the alias is expanded
        return "a: &x [" + ", ".join(["0"] * items) + "]\nb: *x\n"

    items = (MAX_NODES - 5) // 2
    assert parsed(aliased(items)).data["b"] == [0] * items
    with pytest.raises(YamlError, match=r"f.yaml:2: more than 50,000 values once aliases"):
        parsed(aliased(items + 1))


def test_an_alias_to_its_own_anchor_is_refused_and_to_a_finished_one_read():
    assert parsed("a: &c [1]\nb: [*c, *c]\n").data["b"] == [[1], [1]]
    with pytest.raises(YamlError, match=r"f.yaml:1: alias \*c repeats its own anchor"):
        parsed("a: &c [*c]\n")


def test_a_key_twice_in_one_mapping_is_refused_naming_both_lines():
    assert parsed("hot: {conns: 1}\ncold: {conns: 1}\n").data["cold"] == {"conns": 1}
    with pytest.raises(YamlError, match=r"f.yaml:3: key 'conns' appears twice in one mapping "
                                        r"\(lines 2 and 3\)"):
        parsed("hot:\n  conns: 1\n  conns: 2\n")


def test_an_integer_python_cannot_read_is_refused_at_its_line():
    assert parsed("a: 1\nb: " + "9" * 100 + "\n").data["b"] == int("9" * 100)
    with pytest.raises(YamlError, match="f.yaml:2: an integer of 5001 digits is too long"):
        parsed("a: 1\nb: " + "9" * 5001 + "\n")


def test_a_value_python_cannot_build_is_refused_at_its_line():
    with pytest.raises(YamlError, match=r"f.yaml:2: cannot read this value \(month must be"):
        parsed("a: 1\nb: 2001-13-01\n")


@pytest.mark.parametrize(("text", "says"), [
    ("", "f.yaml:1: a scenario is a YAML mapping (empty)"),
    ("- a\n", "f.yaml:1: a scenario is a YAML mapping (not a mapping)"),
    ("a: [1\n", "f.yaml:2: not valid YAML: expected ',' or ']'"),
    ("a: \x07\n", "f.yaml:1: not valid YAML: a control or non-printable character (U+0007)"),
])
def test_what_is_not_a_yaml_mapping_is_refused(text: str, says: str):
    with pytest.raises(YamlError, match=re.escape(says)):
        parsed(text)


def test_a_regular_file_to_the_size_limit_is_read_and_past_it_refused(tmp_path: Path):
    path = tmp_path / "s.yaml"
    path.write_text("a: " + "x" * (MAX_FILE_BYTES - 4) + "\n")
    assert len(read_text(path, "scenario")) == MAX_FILE_BYTES
    path.write_text("a: " + "x" * (MAX_FILE_BYTES - 3) + "\n")
    with pytest.raises(YamlError, match=r"s.yaml: 1,048,577 bytes; a scenario file is at most"):
        read_text(path, "scenario")


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path):
    fifo = tmp_path / "topology.yaml"
    os.mkfifo(fifo)
    refused: list[str] = []

    def read() -> None:
        try:
            read_text(fifo, "topology")
        except YamlError as exc:
            refused.append(str(exc))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():  # before: blocked in open() until a writer came
        with open(fifo, "w"):
            pass
        pytest.fail("reading a FIFO blocked")
    assert refused == [f"{fifo}: a FIFO, not a regular file; fix: give a topology file"]


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/proc/kmsg").exists(),
                    reason="/proc/kmsg is root's")
def test_a_kernel_file_that_reports_no_size_reads_as_empty_at_once():
    assert read_text(Path("/proc/kmsg"), "topology") == ""  # before: blocked for ever


def test_a_directory_a_device_and_bad_text_are_refused(tmp_path: Path):
    with pytest.raises(YamlError, match="a directory, not a regular file"):
        read_text(tmp_path, "scenario")
    with pytest.raises(YamlError, match="a character device, not a regular file"):
        read_text(Path("/dev/zero"), "scenario")
    (tmp_path / "b.yaml").write_bytes(b"a: 1\nb: \xff\n")
    with pytest.raises(YamlError, match=r"b.yaml:2: not UTF-8 text \(byte 0xff\)"):
        read_text(tmp_path / "b.yaml", "scenario")


class Link(Strict):
    delay_ms: float = 0


class Section(Strict):
    conns: int = 0


class Root(Strict):
    name: str
    links: dict[str, Link] = {}
    cold: Section | None = None
    sweep: dict[str, list[int]] = {}


def test_an_override_makes_sections_and_names_itself_in_errors():
    document = parsed("name: n\nlinks: {wan: {delay_ms: 1}}\n")
    document.apply(Override.parse("cold.conns=5"), Root)
    document.apply(Override.parse("links.wan.delay_ms=fast"), Root)
    document.apply(Override.parse("sweep.cold.conns=[1, 2]", dotted=("sweep",)), Root)
    assert document.data["cold"] == {"conns": 5}
    assert document.data["sweep"] == {"cold.conns": [1, 2]}
    with pytest.raises(YamlError) as refused:
        document.validate(Root)
    assert str(refused.value).startswith(
        "--set 'links.wan.delay_ms=fast': links.wan.delay_ms: wants a number (got 'fast')")


@pytest.mark.parametrize(("text", "says"), [
    ("links.wen.delay_ms=5", "--set 'links.wen.delay_ms=5': no 'wen' under links; known: wan; "
                             "did you mean wan?"),
    ("name.x=1", "--set 'name.x=1': name is a str, not a section"),
    ("cold..conns=1", "--set 'cold..conns=1': empty part in key 'cold..conns'"),
    ("cold.conns", "--set 'cold.conns': write KEY=VALUE"),
    ("cold.conns=[", "--set 'cold.conns=[': not valid YAML"),
])
def test_an_override_that_cannot_apply_is_refused_naming_itself(text: str, says: str):
    document = parsed("name: n\nlinks: {wan: {delay_ms: 1}}\n")
    with pytest.raises(YamlError) as refused:
        document.apply(Override.parse(text), Root)
    assert str(refused.value).startswith(says)


def test_errors_name_the_file_line_of_the_field():
    document = parsed("name: n\nlinks:\n  wan:\n    delay_ms: fast\n")
    with pytest.raises(YamlError, match=r"^f.yaml:4: links.wan.delay_ms: wants a number"):
        document.validate(Root)


def test_an_unknown_field_gets_the_nearest_allowed_one_and_only_when_close():
    with pytest.raises(YamlError, match=r"f.yaml:2: links.wan.delay: unknown field; allowed "
                                        r"here: delay_ms; did you mean delay_ms\?$"):
        parsed("name: n\nlinks: {wan: {delay: 1}}\n").validate(Root)
    with pytest.raises(YamlError) as refused:
        parsed("name: n\nzzz: 1\n").validate(Root)
    assert "unknown field; allowed here: cold, links, name, sweep" in str(refused.value)
    assert "did you mean" not in str(refused.value)


def test_infinite_numbers_are_refused_by_the_strict_base():
    assert Link.model_validate({"delay_ms": 1e300}).delay_ms == 1e300
    with pytest.raises(YamlError, match="delay_ms: wants a finite number"):
        parsed("name: n\nlinks: {wan: {delay_ms: .inf}}\n").validate(Root)


def test_many_problems_are_one_line_that_counts_the_rest():
    text = "".join(f"unknown_{i}: {i}\n" for i in range(10))
    with pytest.raises(YamlError) as refused:
        parsed(text).validate(Root)
    message = str(refused.value)
    assert "\n" not in message and message.endswith("(and 8 more problems)")
    assert message.count("unknown field") == 2 and "name: required field" in message
