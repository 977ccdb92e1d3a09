"""wanbench compare on run directories: verdicts, exit codes, formats, refusals, errors."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.compare import engine, render
from harness.analysis.prepare import prepare
from harness.analysis.report import applicable
from harness.results.runset import read_runs

from .compare_synthetic import SCENARIO, Effect, Noise, make_run
from .conftest import run_command
from .synthetic import make_points, write_run

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = next((REPO / "results" / "reference" / "quickstart").iterdir())


def _compare(argv: list[str]) -> int:
    try:
        return run_command("harness.commands.compare", ["compare", *argv])
    except SystemExit as exc:  # argparse's own errors
        return int(exc.code)


def _pair(tmp_path: Path, cand_effect: Effect | None = None, **kwargs: object
          ) -> tuple[Path, Path]:
    base = make_run(seed=1, **kwargs).write(tmp_path)
    cand = make_run(seed=2, kernel="6.19.0-cand", effect=cand_effect, **kwargs).write(tmp_path)
    return base, cand


def halved_quickstart(root: Path) -> Path:
    """The reference quickstart with every reply rate halved and latencies x10, consistently
    in points, per-second samples and histograms (the issue's acceptance case)."""
    run = root / "quickstart" / "20261122T012633-halved"
    shutil.copytree(QUICKSTART, run)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["run_id"] = run.name
    (run / "manifest.json").write_text(json.dumps(manifest))
    points = pd.read_parquet(run / "points.parquet")
    points["reply_rate_rps"] /= 2
    latencies = [c for c in points if c.startswith("resp_time_") and c.endswith("_ms")]
    points[latencies] *= 10
    timeseries = pd.read_parquet(run / "timeseries.parquet")
    replies = (timeseries["source"] == "generator") & (timeseries["metric"] == "replies")
    timeseries.loc[replies, "value"] /= 2
    histograms = pd.read_parquet(run / "histograms.parquet")
    histograms[["lo_us", "hi_us"]] *= 10
    for name, frame in (("points", points), ("timeseries", timeseries),
                        ("histograms", histograms)):
        frame.assign(run_id=run.name).to_parquet(run / f"{name}.parquet", index=False)
    return run


# -- verdicts and exit codes ------------------------------------------------------------------


def test_halved_quickstart_is_a_regression_with_change_and_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _compare([str(QUICKSTART), str(halved_quickstart(tmp_path))]) == 1
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if "| reply_rate_rps |" in line]
    assert len(table) == 6
    points = pd.read_parquet(QUICKSTART / "points.parquet")
    for (dispatch, cold), reps in points.groupby(["dispatch", "cold_conns"])["reply_rate_rps"]:
        line = next(line for line in table if f"dispatch={dispatch}, cold_conns={cold} |" in line)
        assert "| -50.0 % [" in line and "(n=2)" in line, line
        # two repetitions that disagree (select at 5,000 idle sits at its limit: 23,076 and
        # 39,532 replies/s in the reference run) cannot show a change for sure: inconclusive
        verdicts = ("| regression |",) if reps.max() / reps.min() < 1.2 else (
            "| regression |", "| inconclusive |")
        assert any(v in line for v in verdicts), line
    # Per-second samples were used, and that model's intervals are conservative: say so.
    assert "change [≥95 % CI]" in out
    assert "**verdict: regression** (exit 1)" in out


def test_interval_header_states_exact_coverage_with_repetitions_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Runs without per-second spread: t intervals on the repetitions, exactly 95 %."""
    grid = {"cold_conns": [0, 1000], "offered_rate_rps": [500.0, 1000.0]}
    scenario = "bm98-fig9-saturation-vs-cold"
    base = write_run(tmp_path / "a", make_points(scenario, grid, repetitions=4, seed=1))
    cand = write_run(tmp_path / "b", make_points(scenario, grid, repetitions=4, seed=2,
                                                 kernel_release="6.19.0", throughput=0.7))
    assert _compare([str(base), str(cand), "--metric", "reply_rate_rps"]) == 1
    assert "| change [95 % CI] |" in capsys.readouterr().out


def test_quickstart_against_an_unchanged_copy_has_no_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "quickstart" / "20261122T012633-copy"
    shutil.copytree(QUICKSTART, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    (copy / "manifest.json").write_text(json.dumps({**manifest, "run_id": copy.name}))
    code = _compare([str(QUICKSTART), str(copy)])
    out = capsys.readouterr().out
    assert "0 regression(s)" in out
    # 2 repetitions of 3 s cannot promise a 5 % p99 regression would show: inconclusive.
    assert code == 3 and "repetitions per side would detect 5 %" in out


def test_aa_runs_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, cand = _pair(tmp_path, repetitions=5, duration_s=10)
    assert _compare([str(base), str(cand), "--metric", "reply_rate_rps",
                     "--metric", "cpu_server_pct"]) == 0
    out = capsys.readouterr().out
    assert "0 regression(s), 0 improvement(s), 24 unchanged (~), 0 inconclusive" in out
    assert "**verdict: no regression** (exit 0)" in out


def test_ab_runs_exit_1_naming_kernels(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    base, cand = _pair(tmp_path, Effect(throughput=0.95))
    assert _compare([str(base), str(cand), "--metric", "reply_rate_rps"]) == 1
    out = capsys.readouterr().out
    assert "## base 6.18.0-base vs candidate 6.19.0-cand" in out
    assert "| dispatch=select, cold_conns=1000 | reply_rate_rps |" in out
    assert "12 regression(s)" in out


def test_one_repetition_exits_3_and_says_what_would_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, cand = _pair(tmp_path, Effect(throughput=0.5), repetitions=1)
    assert _compare([str(base), str(cand), "--metric", "reply_rate_rps"]) == 3
    out = capsys.readouterr().out
    assert "fewer than 2 repetitions on a side; run at least 2" in out
    assert "**verdict: inconclusive** (exit 3)" in out


def test_short_noisy_runs_exit_3_with_repetitions_or_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, cand = _pair(tmp_path, repetitions=2, duration_s=4,
                       noise=Noise(cv=0.05, between_ratio=0.0))
    assert _compare([str(base), str(cand), "--metric", "reply_rate_rps"]) == 3
    advice = [line for line in capsys.readouterr().out.splitlines()
              if line.startswith("- inconclusive: reply_rate_rps")]
    assert len(advice) == 1
    assert "repetitions per side would detect 5 %" in advice[0]
    assert "as long (" in advice[0]  # the within-repetition noise dominates: a longer window


def test_per_metric_detect_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, cand = _pair(tmp_path, repetitions=5)
    argv = [str(base), str(cand), "--metric", "resp_time_p99_ms"]
    assert _compare(argv) == 3
    assert _compare([*argv, "--detect", "resp_time_p99_ms=2"]) == 0  # "would see a tripling"
    assert "(200 % for resp_time_p99_ms)" in capsys.readouterr().out
    assert _compare([*argv, "--metric", "reply_rate_rps", "--detect", "1.5"]) == 2


def test_several_candidates_against_one_base(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    base = make_run(seed=1).write(tmp_path)
    same = make_run(seed=2, kernel="6.19.0-a").write(tmp_path)
    slower = make_run(seed=3, kernel="6.19.0-b", effect=Effect(throughput=0.8)).write(tmp_path)
    assert _compare([str(base), str(same), str(slower), "--metric", "reply_rate_rps"]) == 1
    out = capsys.readouterr().out
    assert "vs candidate 6.19.0-a" in out and "vs candidate 6.19.0-b" in out
    assert out.count("0 regression(s)") == 1 and "12 regression(s)" in out


def test_a_warning_true_of_every_candidate_is_printed_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = make_run(seed=1).write(tmp_path)
    candidates = [make_run(seed=s, kernel=f"6.19.0-{s}").write(tmp_path) for s in (2, 3)]
    _compare([str(base), *map(str, candidates)])
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning:" in line]
    # cycles per packet are estimated in both candidates' runs: one line says so
    assert sum("cycles_per_packet is estimated" in line for line in warnings) == 1
    assert len(warnings) == len(set(warnings))


def test_improvement_exits_0(tmp_path: Path) -> None:
    base, cand = _pair(tmp_path, Effect(throughput=1.3), repetitions=5)
    assert _compare([str(base), str(cand), "--metric", "reply_rate_rps"]) == 0


# -- formats --------------------------------------------------------------------------------


def test_json_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, cand = _pair(tmp_path, Effect(throughput=0.5))
    assert _compare([str(base), str(cand), "--format", "json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert (document["verdict"], document["exit_code"]) == ("regression", 1)
    (candidate,) = document["candidates"]
    reply = [r for r in candidate["rows"] if r["metric"] == "reply_rate_rps"]
    assert len(reply) == 12
    assert all(r["ci_low"] < r["change"] < r["ci_high"] for r in reply)
    assert all(r["change"] == pytest.approx(-0.5, abs=0.02) for r in reply)


def test_csv_report(tmp_path: Path) -> None:
    base, cand = _pair(tmp_path, Effect(throughput=0.5))
    out = tmp_path / "report.csv"
    assert _compare([str(base), str(cand), "--format", "csv", "--out", str(out)]) == 1
    rows = pd.read_csv(out)
    assert {"point", "metric", "change", "ci_low", "ci_high", "q", "detectable", "verdict",
            "candidate_run"} <= set(rows.columns)
    assert (rows.loc[rows["metric"] == "reply_rate_rps", "verdict"] == "regression").all()


def test_html_report(tmp_path: Path) -> None:
    base, cand = _pair(tmp_path, Effect(latency=3.0), repetitions=5)
    out = tmp_path / "report.html"
    argv = [str(base), str(cand), "--format", "html", "--out", str(out),
            "--metric", "resp_time_mean_ms"]
    assert _compare(argv) == 1
    text = out.read_text()
    assert "<table" in text and "regression" in text and "resp_time_mean_ms" in text
    # the runs themselves, overlaid: each figure drawn beside the page, each kernel a series
    figures = re.findall(r"src='(figures/[^']+\.png)'", text)
    assert figures and all((tmp_path / f).stat().st_size > 0 for f in figures)
    runs = read_runs([base, cand])
    (spec, *_) = applicable(runs)
    series = set(prepare(spec, runs).frame["series"])
    assert any("6.19.0-cand" in s for s in series) and any("6.18.0-base" in s for s in series)


def test_numbers_for_people() -> None:
    assert render.human(39940.0) == "39,940"
    assert render.human(99.61) == "99.6"
    assert render.human(0.17315) == "0.173"
    assert render.human(float("nan")) == "—"
    assert render.percent(-0.4983) == "-49.8"
    assert render.percent(9.0) == "+900.0"
    assert render.percent(25.0) == "+2,500"


def test_help_documents_exit_codes() -> None:
    out = StringIO()
    with pytest.raises(SystemExit) as exc:
        sys.stdout, saved = out, sys.stdout
        try:
            run_command("harness.commands.compare", ["compare", "--help"])
        finally:
            sys.stdout = saved
    assert exc.value.code == 0
    text = out.getvalue()
    for line in ("0  no regression", "1  at least one regression", "2  bad input or any error",
                 "3  inconclusive"):
        assert line in text


# -- what may differ ------------------------------------------------------------------------


def test_header_lists_kernel_cmdline_and_sysctl_differences(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = make_run(seed=1).write(tmp_path)
    cand = make_run(seed=2, kernel="6.19.0-cand")
    cand.manifest["sysctls"]["net.ipv4.tcp_congestion_control"] = "cubic"
    cand.manifest["noise_sources"]["kernel command line"]["value"] = "mitigations=off"
    cand_dir = cand.write(tmp_path)
    _compare([str(base), str(cand_dir), "--metric", "reply_rate_rps"])
    differs = next(line for line in capsys.readouterr().out.splitlines()
                   if line.startswith("- differs:"))
    assert "kernel release: 6.18.0-base -> 6.19.0-cand" in differs
    assert "sysctl net.ipv4.tcp_congestion_control: bbr -> cubic" in differs
    assert "cmdline: console=ttyS0 root=/dev/vda -> mitigations=off" in differs


def test_resumptions_on_the_same_backend_compare_as_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = make_run(seed=1).write(tmp_path)
    cand = make_run(seed=2, kernel="6.19.0-cand")
    # one resumption found nothing left to measure, the other brought loopback up again
    cand.manifest["resumptions"] = [{"topology": {}}, {"topology": {"backend": "none"}}]
    assert _compare([str(base), str(cand.write(tmp_path)), "--metric", "reply_rate_rps"]) in (0, 3)
    assert not capsys.readouterr().err


@pytest.mark.parametrize("change, named", [
    (lambda m: m["scenario"].update(duration_s=10.0), "scenario duration_s: 5.0 -> 10.0"),
    (lambda m: m["scenario"]["hot"].update(rate_rps=20000.0), "scenario hot.rate_rps"),
    (lambda m: m["topology"].update(backend="netem"), "topology backend: none -> netem"),
    (lambda m: m.update(resumptions=[{"topology": {"backend": "netem"}}]),
     "topology backend: none -> none + netem"),  # resumed on another backend
    (lambda m: m["tools"].update(wrk="wrk 4.2.0"), "tool wrk: wrk 4.1.0 -> wrk 4.2.0"),
    (lambda m: m["cpu"].update(count=4), "CPU count: 2 -> 4"),
])
def test_a_different_experiment_is_refused_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change, named: str
) -> None:
    base = make_run(seed=1).write(tmp_path)
    cand = make_run(seed=2, kernel="6.19.0-cand")
    change(cand.manifest)
    cand_dir = cand.write(tmp_path)
    argv = [str(base), str(cand_dir), "--metric", "reply_rate_rps"]
    assert _compare(argv) == 2
    err = capsys.readouterr().err
    assert named in err and "--force" in err and err.count("\n") == 1
    assert _compare([*argv, "--force"]) in (0, 3)
    captured = capsys.readouterr()
    assert "WARNING" in captured.err and named in captured.err
    assert "compared despite a different experiment (--force)" in captured.out


def test_repetitions_may_differ(tmp_path: Path) -> None:
    base = make_run(seed=1, repetitions=3).write(tmp_path)
    cand = make_run(seed=2, kernel="6.19.0-cand", repetitions=5).write(tmp_path)
    assert _compare([str(base), str(cand), "--metric", "reply_rate_rps"]) in (0, 3)


# -- errors: exit 2, one line, never a traceback -------------------------------------------


def _error(tmp_path: Path, problem: str) -> list[str]:
    base, cand = _pair(tmp_path)
    if problem == "missing":
        return [str(base), str(tmp_path / "nope")]
    if problem == "not-a-run":
        (tmp_path / "empty").mkdir()
        return [str(base), str(tmp_path / "empty")]
    if problem == "folder-of-runs":
        return [str(tmp_path / SCENARIO), str(cand)]
    if problem == "bad-manifest":
        (cand / "manifest.json").write_text("{not json")
        return [str(base), str(cand)]
    if problem == "different-scenarios":
        other = write_run(tmp_path / "other", make_points("bm98-ufalloc", repetitions=2))
        return [str(base), str(other)]
    if problem == "no-common-points":
        cand2 = make_run(seed=3, kernel="6.19.0-x", grid=[{"dispatch": "rtsig",
                                                           "cold_conns": 7}])
        return [str(base), str(cand2.write(tmp_path / "x"))]
    if problem == "same-run":
        return [str(base), str(base)]
    if problem == "bad-format":
        return [str(base), str(cand), "--format", "pdf"]
    if problem == "bad-metric":
        return [str(base), str(cand), "--metric", "replies_per_fortnight"]
    if problem == "unmeasured-metric":
        return [str(base), str(cand), "--metric", "stream_throughput_mbps"]
    if problem == "bad-alpha":
        return [str(base), str(cand), "--alpha", "5"]
    if problem == "bad-detect":
        return [str(base), str(cand), "--detect", "p99=0.1"]
    if problem == "unwritable-out":
        return [str(base), str(cand), "--out", str(tmp_path / "no" / "such" / "dir.md")]
    if problem == "no-candidate":
        return [str(base)]
    raise AssertionError(problem)


ERRORS = ["missing", "not-a-run", "folder-of-runs", "bad-manifest", "different-scenarios",
          "no-common-points", "same-run", "bad-format", "bad-metric", "unmeasured-metric",
          "bad-alpha", "bad-detect", "unwritable-out", "no-candidate"]


@pytest.mark.parametrize("problem", ERRORS)
def test_errors_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     problem: str) -> None:
    argv = _error(tmp_path, problem)
    assert _compare(argv) == 2
    err = capsys.readouterr().err.strip()
    lines = err.splitlines()
    if problem != "no-candidate":  # argparse's own usage line for a missing positional
        assert len(lines) == 1, err
    assert lines[-1].startswith(("wanbench compare: ", "usage:", "wanbench"))
    assert "Traceback" not in err


def test_error_messages_name_problem_and_fix(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    expectations = {
        "missing": "no such directory; give a run directory",
        "folder-of-runs": "holds 2 runs; give one run directory",
        "different-scenarios": "different scenarios",
        "no-common-points": "compare runs of the same sweep",
        "bad-metric": "invalid choice: 'replies_per_fortnight'",
        "unmeasured-metric": "no such column in the base run",
    }
    for problem, text in expectations.items():
        folder = tmp_path / problem
        folder.mkdir()
        assert _compare(_error(folder, problem)) == 2
        assert text in capsys.readouterr().err, problem


def test_internal_error_is_exit_2_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, cand = _pair(tmp_path)

    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("boom")

    monkeypatch.setattr(engine, "compare", broken)
    assert _compare([str(base), str(cand)]) == 2
    err = capsys.readouterr().err
    assert "internal error (KeyError" in err and "Traceback" not in err


def test_wanbench_entry_point_exit_codes(tmp_path: Path) -> None:
    base, cand = _pair(tmp_path, Effect(throughput=0.9))
    done = subprocess.run([sys.executable, "-m", "harness.cli", "compare", str(base), str(cand),
                           "--metric", "reply_rate_rps"], capture_output=True, text=True,
                          timeout=120, cwd=REPO)
    assert done.returncode == 1, done.stderr
    assert "12 regression(s)" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "harness.cli", "compare", str(base), str(cand),
                          "--format", "pdf"], capture_output=True, text=True, timeout=120,
                         cwd=REPO)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
