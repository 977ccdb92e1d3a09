"""An external server's `files:` are written into its work directory and nowhere else: a
name that is absolute or climbs out is refused at validation (file:line: field, exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.scenario import ScenarioError, parse
from harness.servers import describe
from harness.templates import MAX_ARG_BYTES
from tests.conftest import REPO

SCENARIO = """name: escape
topology: {{file: topologies/loopback.yaml}}
server:
  kind: external
  name: short-lived
  port: 9
  ready_timeout_s: 1
  command: ["true"]
  files:
    {name}: "written by the escape test"
hot: {{generator: sclient, conns: 1, rate_rps: 10}}
warmup_s: 0
duration_s: 0.2
"""


def scenario_text(name: str) -> str:
    return SCENARIO.format(name=json.dumps(name))  # a JSON string is a YAML flow scalar


def outside_names(tmp_path: Path) -> dict[str, Path]:
    """File names that would land outside the work directory, and where they would land."""
    target = tmp_path / "outside"
    climb = "../" * 16 + str(tmp_path / "climbed").lstrip("/")  # deeper than any run dir
    return {str(target / "absolute"): target / "absolute",
            climb: tmp_path / "climbed"}


def test_run_refuses_names_outside_the_work_directory(tmp_path: Path):
    (tmp_path / "outside").mkdir()
    for name, lands in outside_names(tmp_path).items():
        scenario = tmp_path / "escape.yaml"
        scenario.write_text(scenario_text(name))
        out = tmp_path / "out"
        done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(scenario),
                               "--out", str(out)], capture_output=True, text=True, timeout=120,
                              cwd=REPO)
        assert not lands.exists(), f"{name!r} was written outside the work directory"
        assert done.returncode == 2, (done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        assert f"{scenario}:9: server.files: file name {name!r}" in done.stderr
        assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("name", ["/etc/wanbench-test", "../x", "../../x", "a/../../x", "..",
                                  ".", "", "a\0b", "sub/x", "a/", "./x", "a//b"])
def test_bad_file_names_are_refused(name: str):
    with pytest.raises(ScenarioError) as refused:
        parse(scenario_text(name), "s.yaml")
    message = str(refused.value)
    assert message.startswith("s.yaml:9: server.files: file name ")
    assert "fix:" in message


@pytest.mark.parametrize("name", ["nginx.conf", ".htpasswd", "a..b", "my-file_1.txt"])
def test_plain_file_names_are_kept(name: str):
    assert name in parse(scenario_text(name)).server.files


def test_swept_files_are_checked_too():
    text = scenario_text("nginx.conf") + "sweep:\n  server.files: [{a: x}, {../b: y}]\n"
    with pytest.raises(ScenarioError, match=r"server.files: file name '../b'"):
        parse(text, "s.yaml")


@pytest.mark.parametrize(("field", "template", "says"), [
    ("command", '["nginx", "-c", "{workdir}/{conf}"]', "command[2] uses {conf}"),
    ("command", '["sh", "-c", "echo {"]', "command[2] is not a valid template"),
    ("file", '"server { listen {port}; }"', "files.nginx.conf is not a valid template"),
])
def test_a_template_that_cannot_fill_is_refused_at_validation(field: str, template: str,
                                                              says: str):
    """Before: an unknown {name} or a lone brace was a KeyError traceback in the runner, after
    the topology was up."""
    text = scenario_text("nginx.conf")
    if field == "command":
        text = text.replace('command: ["true"]', f"command: {template}")
    else:
        text = text.replace('"written by the escape test"', template)
    with pytest.raises(ScenarioError) as refused:
        parse(text, "s.yaml")
    assert says in str(refused.value) and "fix:" in str(refused.value)


def test_templates_fill_and_files_stay_in_the_work_directory(tmp_path: Path):
    text = scenario_text("nginx.conf").replace(
        '"written by the escape test"', '"http {{ listen {address}:{port}; }}"').replace(
        'command: ["true"]', 'command: ["nginx", "-c", "{workdir}/nginx.conf"]')
    files, argv = parse(text).server.render(tmp_path, "198.18.0.2")
    assert files == {tmp_path / "nginx.conf": "http { listen 198.18.0.2:9; }"}
    assert argv == ["nginx", "-c", f"{tmp_path}/nginx.conf"]


@pytest.mark.parametrize("template", [
    "{port:>3000000000}",  # before: allocated 3 GB
    "{workdir.__class__.__init__.__globals__}",  # before: reached the harness's globals
    "{workdir[0]}", "{port!r}", "{0}", "{}",
])
def test_a_template_fills_bare_documented_fields_and_nothing_else(template: str):
    text = scenario_text("nginx.conf").replace('command: ["true"]', f'command: ["{template}"]')
    with pytest.raises(ScenarioError) as refused:
        parse(text, "s.yaml")
    message = str(refused.value)
    assert f"command[0] uses {template}, which is not one of {{workdir}}" in message
    assert "fix:" in message


def test_an_argument_fills_to_the_kernels_limit_and_no_further():
    argument = "x" * MAX_ARG_BYTES
    text = scenario_text("nginx.conf").replace('command: ["true"]', f'command: ["{argument}"]')
    assert parse(text).server.command == [argument]
    with pytest.raises(ScenarioError, match="command.0. fills to more than 131,071 bytes"):
        parse(text.replace(argument, argument + "x"))


def test_the_files_hold_the_reply_body_once():
    largest = describe().limits["reply_bytes"][1]
    text = scenario_text("nginx.conf").replace("port: 9", f"port: 9\n  reply_bytes: "
                                               f"{largest}")
    once = text.replace('"written by the escape test"', '"return 200 {body};"')
    assert parse(once).server.reply_bytes == largest  # counted, not built
    with pytest.raises(ScenarioError, match="files fill to more than"):
        parse(once.replace("{body}", "{body}{body}"))
