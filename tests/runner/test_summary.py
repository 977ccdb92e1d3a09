"""What `wanbench run` tells people and CI after a run: summary.json's content, thresholds
(both ways), the exit status, and the terminal table at 80 columns; from synthetic points."""

from __future__ import annotations

import argparse
import io
import json
import logging
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console
from rich.logging import RichHandler

import harness
from harness.analysis.numbers import duration, metric, point_label
from harness.analysis.summary import (
    EXIT_INVALID,
    EXIT_THRESHOLDS,
    EXIT_UNJUDGED,
    document,
    gate,
    summarise,
)
from harness.cli import build_parser
from harness.commands import LOGGER, terminal
from harness.commands.run_terminal import (
    TerminalDisplay,
    _also_write_summary,
    _explain,
    _print_summary,
)
from harness.results.store import RunDir
from harness.runner.outcome import RunResult
from harness.runner.scenario_run import summaries_of, write_summary
from harness.scenario import Scenario, ScenarioError, Threshold, parse

REPO = Path(__file__).resolve().parents[2]

SCENARIO = """
name: thresholds
hot: {generator: sclient, conns: 5, rate_rps: 1000}
sweep:
  server.dispatch: [select, epoll]
  cold.conns: {start: 0, stop: 1000, step: 1000}
thresholds: {resp_time_p99_ms: "< 5", reply_rate_rps: ">= 900"}
"""


def frame(rows: list[tuple[str, str, int, int, bool, float, float]]) -> pd.DataFrame:
    """points.parquet rows: point_id, dispatch, cold_conns, repetition, valid, rate, p99."""
    return pd.DataFrame([
        {"point_id": pid, "dispatch": d, "cold_conns": c, "repetition": r, "valid": v,
         "reply_rate_rps": rate, "resp_time_p99_ms": p99, "cpu_server_pct": 50.0,
         "resp_time_p50_ms": 0.054, "steal_pct": 0.0,
         "invalid_reason": None if v else "late sends: 3 %",
         "invalid_codes": None if v else "late_sends"}
        for pid, d, c, r, v, rate, p99 in rows])


ORDER = ["s0", "s1", "e0", "e1"]  # the sweep's order: select before epoll, as written


def finished(points: list, name: str = "thresholds", status: int = 0,
             run_dir: Path = Path("results/run")) -> RunResult:
    return RunResult(status, run_dir, name, len(points), len(points), points)


def shown_status(points: list, allow_invalid: bool, console: Console) -> int:
    """A finished run's exit status, and what the terminal says about it."""
    status = gate(points, allow_invalid).status
    TerminalDisplay(console, quiet=True, allow_invalid=allow_invalid,
                    table_to_stderr=True).outcome(finished(points, status=status))
    return status


def good_rows() -> list:
    return [(pid, d, c, r, True, 1000.0 + r, 3.0 + r)
            for pid, d, c in (("e1", "epoll", 1000), ("s0", "select", 0),
                              ("e0", "epoll", 0), ("s1", "select", 1000))
            for r in (0, 1)]


def test_a_run_that_keeps_its_thresholds_exits_0_and_says_so():
    scenario = parse(SCENARIO)
    points = summarise(frame(good_rows()), ["dispatch", "cold_conns"], ORDER,
                       scenario.thresholds)
    assert [p.point_id for p in points] == ORDER
    assert points[0].medians["reply_rate_rps"] == 1000.5
    assert all(c.passed for p in points for c in p.thresholds)
    assert shown_status(points, allow_invalid=False, console=Console(file=io.StringIO())) == 0


def test_a_run_that_crosses_a_threshold_exits_99_naming_the_point_and_metric():
    rows = [r if r[0] != "s1" else (*r[:5], 800.0, 12.0) for r in good_rows()]
    points = summarise(frame(rows), ["dispatch", "cold_conns"], ORDER,
                       parse(SCENARIO).thresholds)
    out = io.StringIO()
    assert shown_status(points, allow_invalid=False, console=Console(file=out, width=200)) == \
        EXIT_THRESHOLDS
    said = out.getvalue()
    assert "dispatch=select cold=1,000: resp_time_p99_ms 12.0 ms, the scenario asks < 5 ms" \
        in said
    assert "reply_rate_rps 800" in said and "asks >= 900" in said
    doc = json.loads(json.dumps(document({"run_id": "r"}, points, EXIT_THRESHOLDS)))
    assert doc["thresholds_crossed"] == 2 and doc["exit_status"] == 99
    crossed = [c for c in doc["points"][1]["thresholds"] if c["passed"] is False]
    assert {c["metric"] for c in crossed} == {"resp_time_p99_ms", "reply_rate_rps"}


def test_an_invalid_point_keeps_its_values_marked_and_its_reasons_and_exits_1():
    rows = [r if r[0] != "e0" else (*r[:4], False, *r[5:]) for r in good_rows()]
    points = summarise(frame(rows), ["dispatch", "cold_conns"], ORDER,
                       parse(SCENARIO).thresholds)
    e0 = points[2]
    assert (e0.valid, e0.total, e0.medians_of_invalid) == (0, 2, True)
    assert e0.medians["reply_rate_rps"] == 1000.5  # what it measured, not a dash
    assert [(r.repetition, r.codes) for r in e0.reasons] == [(0, ["late_sends"]),
                                                             (1, ["late_sends"])]
    assert all(c.passed is None for c in e0.thresholds)  # nothing valid to judge
    unthresholded = summarise(frame(rows), ["dispatch", "cold_conns"], ORDER, {})
    said = io.StringIO()
    assert shown_status(unthresholded, allow_invalid=False, console=Console(file=said)) == \
        EXIT_INVALID
    assert "2 point × repetition(s) invalid: exit 1 (--allow-invalid to exit 0)" in \
        said.getvalue()
    quiet = Console(file=io.StringIO())
    assert shown_status(unthresholded, allow_invalid=True, console=quiet) == 0


def test_a_crossed_threshold_is_said_in_one_unit():
    """977 µs beside "< 0.01" read as if the bound were in µs: value and bound in ms."""
    rows = [r if r[0] != "s1" else (*r[:6], 0.977) for r in good_rows()]
    thresholds = parse(SCENARIO.replace('"< 5"', '"< 0.01"')).thresholds
    points = summarise(frame(rows), ["dispatch", "cold_conns"], ORDER, thresholds)
    said = io.StringIO()  # the status's lines alone: the table shows µs where they suit
    _explain(points, allow_invalid=False, console=Console(file=said, width=200))
    assert "resp_time_p99_ms 0.977 ms, the scenario asks < 0.01 ms" in said.getvalue()
    assert "µs" not in said.getvalue()


@pytest.mark.parametrize("allow_invalid", [False, True])
def test_thresholds_that_could_not_be_judged_fail_the_gate_with_allow_invalid_too(
        allow_invalid):
    """k6 fails a threshold it cannot evaluate; a CI gate that judged nothing must not pass."""
    rows = [r if r[0] != "e0" else (*r[:4], False, *r[5:]) for r in good_rows()]
    points = summarise(frame(rows), ["dispatch", "cold_conns"], ORDER,
                       parse(SCENARIO).thresholds)
    said = io.StringIO()
    assert shown_status(points, allow_invalid, Console(file=said, width=200)) == EXIT_UNJUDGED
    assert ("thresholds not judged on 1 point(s) without a valid repetition: no verdict, "
            "exit 3 (with --allow-invalid too)") in said.getvalue()
    # a crossed threshold elsewhere is a verdict, and comes first
    crossed = [r if r[0] != "s1" else (*r[:5], 800.0, r[6]) for r in rows]
    points = summarise(frame(crossed), ["dispatch", "cold_conns"], ORDER,
                       parse(SCENARIO).thresholds)
    assert shown_status(points, allow_invalid, Console(file=io.StringIO())) == EXIT_THRESHOLDS


def test_the_table_fits_80_columns_in_sweep_order_with_per_metric_formats():
    rows = [r if r[0] != "e0" else (*r[:4], False, *r[5:]) for r in good_rows()]
    points = summarise(frame(rows), ["dispatch", "cold_conns"], ORDER, {})
    out = io.StringIO()
    console = Console(file=out, width=80, color_system=None)
    _print_summary(finished(points, parse(SCENARIO).name), console, to_stderr=True)
    text = out.getvalue()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in text  # no header or value cut
    header = next(line for line in lines if "dispatch" in line)
    assert header.split() == ["dispatch", "cold", "replies/s", "CPU", "%", "p50", "p99",
                              "steal", "%", "valid"]
    body = [line.split() for line in lines if line.split()[:1] in (["select"], ["epoll"])]
    assert [row[:2] for row in body] == [["select", "0"], ["select", "1,000"],
                                         ["epoll", "0"], ["epoll", "1,000"]]
    assert body[0][2:] == ["1,000", "50.0", "54.0", "µs", "3.50", "ms", "0.0", "2/2"]
    assert body[2][2] == "1,000*" and body[2][-1] == "0/2"
    assert "invalid dispatch=epoll cold=0 rep 0: late sends: 3 %" in text


@pytest.mark.parametrize(("column", "value", "shown"), [
    ("resp_time_p50_ms", 0.054, "54.0 µs"), ("resp_time_p99_ms", 3.4, "3.40 ms"),
    ("resp_time_p99_ms", 460.2, "460 ms"), ("resp_time_p99_ms", 1200, "1.20 s"),
    ("latency_us", 0.5, "500 ns"), ("reply_rate_rps", 40582.7, "40,583"),
    ("cpu_server_pct", 99.46, "99.5"), ("cold_conns", 5000, "5,000"),
    ("dispatch", "epoll", "epoll"), ("reply_rate_rps", None, "—"),
    ("reply_rate_rps", float("nan"), "—"),
])
def test_each_metric_has_its_format_and_times_their_unit(column, value, shown):
    assert metric(column, value) == shown


def test_one_spelling_of_microseconds_and_points_as_key_value():
    assert duration(54e-6) == "54.0 µs"
    assert point_label({"dispatch": "select", "cold_conns": 0}) == "dispatch=select cold=0"
    assert point_label({}) == "point"


@pytest.mark.parametrize(("text", "value", "holds"), [
    ("< 5", 4.9, True), ("< 5", 5.0, False), ("<= 5", 5.0, True),
    ("> 30000", 30001, True), (">30000", 29999, False), (">= 1e3", 1000, True),
])
def test_a_threshold_holds_both_ways(text, value, holds):
    assert Threshold.model_validate(text).holds(value) is holds


@pytest.mark.parametrize(("thresholds", "named"), [
    ('{resp_time_p99_ms: "<< 5"}', "thresholds.resp_time_p99_ms: '<< 5' is not a threshold"),
    ('{resp_time_p99_ms: "< fast"}', "'< fast' is not a threshold"),
    ('{resp_time_p99_ms: 5}', "write an operator (<, <=, >, >=) and a number"),
    ('{resp_p99: "< 5"}', "'resp_p99' is not a metric; a metric's name ends with its unit"),
    ('{cold_conns: "< 5"}', "'cold_conns' is not a metric"),
])
def test_bad_threshold_syntax_is_refused_at_its_line(thresholds, named):
    text = SCENARIO.replace('{resp_time_p99_ms: "< 5", reply_rate_rps: ">= 900"}', thresholds)
    with pytest.raises(ScenarioError) as caught:
        parse(text, "mine.yaml")
    assert str(caught.value).startswith("mine.yaml:7: ")
    assert named in str(caught.value)


def test_thresholds_and_ranges_round_trip_through_the_manifest_without_warnings():
    scenario = parse(SCENARIO)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Pydantic's UserWarning on a Range was one
        dumped = scenario.model_dump(mode="json", by_alias=True)
    assert dumped["thresholds"] == {"resp_time_p99_ms": "< 5", "reply_rate_rps": ">= 900"}
    assert type(scenario).model_validate(dumped) == scenario


def test_version_is_printed():
    done = subprocess.run([sys.executable, "-m", "harness.cli", "--version"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, f"wanbench {harness.__version__}")


def walk(parser: argparse.ArgumentParser, name: str = "wanbench"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command, sub in action.choices.items():
                yield from walk(sub, f"{name} {command}")


def test_every_command_has_a_description_and_every_option_help():
    missing = [f"{name}: {action.option_strings or action.dest}"
               for name, parser in walk(build_parser())
               for action in parser._actions
               if not isinstance(action, argparse._SubParsersAction) and not action.help]
    missing += [f"{name}: no description" for name, parser in walk(build_parser())
                if not parser.description]
    assert missing == []


def test_the_check_sees_a_command_without_help():
    parser = argparse.ArgumentParser(description="x")
    parser.add_subparsers().add_parser("bare").add_argument("--flag")
    assert [name for name, p in walk(parser) if not p.description] == ["wanbench bare"]


def test_shell_completion_comes_from_the_parser():
    shtab = pytest.importorskip("shtab")
    parser = build_parser()
    parser.prog = "wanbench"
    script = shtab.complete(parser, shell="bash")
    assert "compare" in script and "--allow-invalid" in script and "--json" in script


def test_the_readme_quickstart_table_is_what_the_terminal_shows():
    run = sorted((REPO / "results/reference/quickstart").glob("*/manifest.json"))[-1].parent
    stored = RunDir(run)
    scenario = Scenario.model_validate(stored.read_manifest()["scenario"])
    out = io.StringIO()
    _print_summary(finished(summaries_of(stored, scenario), scenario.name),
                   Console(file=out, width=80, color_system=None), to_stderr=True)
    shown = [line.strip() for line in out.getvalue().splitlines() if line.strip()]
    readme = (REPO / "README.md").read_text()
    block = readme.split("quickstart: median over valid repetitions", 1)[1].split("```")[0]
    assert shown == ["quickstart: median over valid repetitions",
                     *(line.strip() for line in block.splitlines() if line.strip())]


def test_summary_json_goes_to_the_run_to_a_file_and_to_stdout(tmp_path: Path, capsys):
    from tests.analysis.synthetic import make_points, write_run

    run = RunDir(write_run(tmp_path / "results", make_points(
        "bmd99-fig8-reply-rate-vs-cold", {"dispatch": ["select", "epoll"]}, noise=0.0)))
    points = summarise(pd.read_parquet(run.path / "points.parquet"), ["dispatch"], [], {})
    capsys.readouterr()
    write_summary(run, points, 0)
    _also_write_summary(finished(points, run_dir=run.path), str(tmp_path / "ci.json"))
    _also_write_summary(finished(points, run_dir=run.path), "-")
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((tmp_path / "ci.json").read_text()) == \
        json.loads((run.path / "summary.json").read_text())
    assert printed["exit_status"] == 0 and len(printed["points"]) == 2
    assert not (Path.cwd() / "-").exists()


def test_log_lines_carry_no_source_path_and_q_v_set_the_level(capsys, monkeypatch):
    log = logging.getLogger(LOGGER)
    terminal(0)  # piped here (pytest captures stderr): plain lines
    log.info("dispatch=select cold=0 rep 0: 1,000 replies/s")
    log.debug("hidden")
    err = capsys.readouterr().err
    assert "INFO dispatch=select cold=0 rep 0: 1,000 replies/s" in err
    assert "hidden" not in err and ".py:" not in err
    terminal(-1)
    log.info("hidden")
    log.warning("kept")
    err = capsys.readouterr().err
    assert "kept" in err and "hidden" not in err
    monkeypatch.setenv("FORCE_COLOR", "1")  # a terminal: rich's handler, still no path
    terminal(1)
    (handler,) = log.handlers
    assert isinstance(handler, RichHandler)
    log.debug("shown with -v")
    err = capsys.readouterr().err
    assert "shown with -v" in err and ".py:" not in err and "summary.py" not in err


def test_summary_json_is_strict_json_when_a_parameter_or_metric_is_missing():
    rows = frame(good_rows())
    rows.loc[rows["point_id"] == "s0", "reply_rate_rps"] = float("nan")
    rows["one_way_delay_ms"] = float("nan")  # a parameter column of no value here
    points = summarise(rows, ["dispatch", "one_way_delay_ms"], ORDER, {})
    text = json.dumps(document({}, points, 0), allow_nan=False)  # raises on NaN
    first = json.loads(text)["points"][0]
    assert first["parameters"] == {"dispatch": "select", "one_way_delay_ms": None}
    assert first["medians"]["reply_rate_rps"] is None
    assert "one_way_delay_ms" not in first["medians"]  # a sweep axis is not a metric


def test_the_readme_jq_recipe_prints_no_median_of_invalid_repetitions(tmp_path: Path):
    """summary.json keeps what an invalid point measured (marked medians_of_invalid); the
    README's recipe must not print it as a result."""
    jq = shutil.which("jq")
    if jq is None:
        pytest.skip("jq is not installed")
    readme = (REPO / "README.md").read_text()
    (recipe,) = re.findall(r"--json - \| jq '([^']+)'", readme)
    rows = [r if r[0] != "e0" else (*r[:4], False, *r[5:]) for r in good_rows()]
    points = summarise(frame(rows), ["dispatch", "cold_conns"], ORDER, {})
    done = subprocess.run([jq, "-c", recipe], input=json.dumps(document({}, points, 1)),
                          capture_output=True, text=True, timeout=30, check=True)
    shown = [json.loads(line) for line in done.stdout.splitlines()]
    assert [s["p99"] for s in shown] == [3.5, 3.5, None, 3.5]  # e0: no valid repetition


def _synthetic_run(tmp_path: Path) -> tuple[RunDir, list]:
    from tests.analysis.synthetic import make_points, write_run

    points = make_points("my-sweep", {"dispatch": ["select", "epoll"]}, repetitions=2)
    points.loc[points["dispatch"] == "epoll", "valid"] = False
    run = RunDir(write_run(tmp_path / "results", points))
    frame = pd.read_parquet(run.path / "points.parquet")
    return run, summarise(frame, ["dispatch"], [], {})


def _exporting(tmp_path: Path, **given) -> argparse.Namespace:
    return argparse.Namespace(**{"latency": False, "export": None, "export_timeseries": None,
                                 "json": None, **given})


def test_latency_prints_each_points_percentiles_as_wrk_does(tmp_path: Path, capsys):
    from harness.commands.run_terminal import _exports

    run, points = _synthetic_run(tmp_path)
    _exports(_exporting(tmp_path, latency=True), finished(points, run_dir=run.path),
             Console(file=io.StringIO(), width=80))
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "p50" in line).split()
    assert header == ["dispatch", "p50", "p75", "p90", "p99", "p99.9", "p99.99", "max"]
    assert "…" not in out and max(map(len, out.splitlines())) <= 80
    select = next(line.split() for line in out.splitlines() if line.split()[:1] == ["select"])
    assert len(select) == 15 and {unit for unit in select[2::2]} <= {"µs", "ms", "s"}
    assert any(line.split()[:1] == ["epoll*"] for line in out.splitlines())  # not a result


@pytest.mark.parametrize("suffix", [".md", ".csv", ".json"])
def test_the_table_and_the_time_series_export_as_their_suffix_says(tmp_path: Path,
                                                                   suffix: str):
    from harness.commands.run_terminal import _exports

    run, points = _synthetic_run(tmp_path)
    table, samples = tmp_path / f"table{suffix}", tmp_path / f"samples{suffix}"
    _exports(_exporting(tmp_path, export=table, export_timeseries=samples),
             finished(points, run_dir=run.path), Console(file=io.StringIO()))
    text = table.read_text()
    if suffix == ".md":
        lines = text.splitlines()
        assert lines[0].startswith("| dispatch | replies/s |") and len(lines) == 4
        assert "| select |" in lines[2] and " ms |" in text or " µs |" in text
    elif suffix == ".csv":
        frame = pd.read_csv(table)
        assert list(frame["dispatch"]) == ["select", "epoll"]
        assert list(frame["medians_of_invalid"]) == [False, True]
        series = pd.read_csv(samples)
        assert {"t_s", "source", "metric", "value", "point", "valid"} <= set(series.columns)
        assert set(series["point"]) == {"dispatch=select", "dispatch=epoll"}
    else:
        rows = json.loads(text)
        assert [r["valid"] for r in rows] == [2, 0] and rows[0]["reply_rate_rps"] > 0
        assert json.loads(samples.read_text())[0]["point"].startswith("dispatch=")


def test_an_export_file_without_a_known_suffix_is_refused_before_the_run(tmp_path: Path):
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", "x.yaml", "--export",
                           str(tmp_path / "table.txt")], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert "table.txt: name the format by the suffix: .md, .csv, .json" in done.stderr


def _crowded(codes: str, thresholds: str = "") -> list:
    """e0's repetitions invalid with `codes`; thresholds: the scenario's, or none."""
    rows = frame([r if r[0] != "e0" else (*r[:4], False, *r[5:]) for r in good_rows()])
    rows.loc[~rows["valid"], "invalid_codes"] = codes
    limits = parse(SCENARIO).thresholds if thresholds else {}
    return summarise(rows, ["dispatch", "cold_conns"], ORDER, limits)


@pytest.mark.parametrize(("codes", "thresholds", "allow_invalid", "status", "busy"), [
    # only others' work on the measured CPUs: the machine was too busy to judge
    ("generator_crowded", "", False, EXIT_INVALID, True),
    ("steal,crowded_server", "yes", True, EXIT_UNJUDGED, True),  # no verdict either way
    ("generator_crowded", "", True, 0, False),  # invalid allowed: a verdict, nothing to say
    # the generator's own lateness beside others': not the machine's doing alone
    ("late_sends,steal", "", False, EXIT_INVALID, False),
    ("late_sends", "yes", True, EXIT_UNJUDGED, False),
])
def test_a_run_spoiled_only_by_others_says_the_machine_was_too_busy(codes, thresholds,
                                                                    allow_invalid, status,
                                                                    busy):
    points = _crowded(codes, thresholds)
    said = io.StringIO()
    assert shown_status(points, allow_invalid, Console(file=said, width=300)) == status
    line = ("the machine was too busy to judge: 2 point × repetition(s) invalid, each only for "
            "others' work on the measured CPUs (")
    assert (line in said.getvalue()) is busy
    if busy:
        assert said.getvalue().count("(--quiet-wait S)") == 1
    doc = document({}, points, status)
    assert doc["format"] == 2
    assert doc["machine_too_busy"] is ("late_sends" not in codes)


def test_the_readme_ci_recipe_is_a_workflow_whose_options_exist():
    """The README's CI gate: valid YAML, and every option its commands pass is one that
    `wanbench run` or `wanbench compare` takes (a renamed option would break users' CI)."""
    import yaml

    readme = (REPO / "README.md").read_text()
    block = readme.split("### A CI gate on one shared machine", 1)[1]
    workflow = yaml.safe_load(block.split("```yaml", 1)[1].split("```", 1)[0])
    steps = workflow["jobs"]["gate"]["steps"]
    scripts = [step["run"] for step in steps if "run" in step]
    options = {name: {o for action in sub._actions for o in action.option_strings}
               for name, sub in next(a for a in build_parser()._actions
                                     if isinstance(a, argparse._SubParsersAction)
                                     ).choices.items()}
    used = {"run": set(), "compare": set()}
    for script in scripts:
        command = "run" if "wanbench run" in script else "compare" if "compare" in script \
            else None
        lines = [line for line in script.splitlines()
                 if "wanbench" in line or "set --" in line or line.lstrip().startswith("--")]
        if command:
            used[command] |= set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", "\n".join(lines)))
    assert used["run"] >= {"--out", "--quiet-wait", "--set"}
    assert used["compare"] >= {"--out", "--force"}
    for command, names in used.items():
        assert names <= options[command], names - options[command]
    assert "exit 4" in scripts[1] and '-eq 3' in scripts[2] and '-eq 1' in scripts[3]
