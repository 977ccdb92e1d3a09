"""wanbench compare and wanbench noise on run directories: sides of runs, verdicts, exit codes,
invalid points, formats, refusals, errors."""

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

from harness.analysis.compare import engine, noise, render
from harness.analysis.prepare import prepare
from harness.analysis.report import applicable, table_html
from harness.results.runset import read_runs

from .compare_synthetic import SCENARIO, Effect, Noise, make_run
from .conftest import run_command
from .synthetic import make_points, write_run

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = sorted((REPO / "results" / "reference" / "quickstart").iterdir())[-1]


def _compare(argv: list[str]) -> int:
    try:
        return run_command("harness.commands.compare", ["compare", *argv])
    except SystemExit as exc:  # argparse's own errors
        return int(exc.code)


def _noise(argv: list[str]) -> int:
    try:
        return run_command("harness.commands.noise", ["noise", *argv])
    except SystemExit as exc:
        return int(exc.code)


def _runs(root: Path, seeds: range, kernel: str = "6.18.0-base", **kwargs: object) -> list[str]:
    """Runs of one kernel under root/<scenario>/, one per seed."""
    return [str(make_run(seed=s, kernel=kernel, **kwargs).write(root)) for s in seeds]


def _pair(tmp_path: Path, cand_effect: Effect | None = None, **kwargs: object
          ) -> tuple[Path, Path]:
    base = make_run(seed=1, **kwargs).write(tmp_path)
    cand = make_run(seed=2, kernel="6.19.0-cand", effect=cand_effect, **kwargs).write(tmp_path)
    return base, cand


def _three_per_side(tmp_path: Path, cand_effect: Effect | None = None, **kwargs: object
                    ) -> list[str]:
    """`BASE1 BASE2 BASE3 -- CAND1 CAND2 CAND3`."""
    base = _runs(tmp_path / "base", range(1, 4), **kwargs)
    cand = _runs(tmp_path / "cand", range(4, 7), "6.19.0-cand", effect=cand_effect, **kwargs)
    return [*base, "--", *cand]


def halved_quickstart(root: Path) -> Path:
    """The reference quickstart with every reply rate halved and latencies x10, consistently
    in points, per-second samples and histograms."""
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


# -- one run per side: never a regression without a known run-to-run term -------------------


def test_halved_quickstart_one_run_per_side_is_inconclusive_not_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Even a halving: with one run per side nothing says what a second run moves."""
    assert _compare([str(QUICKSTART), str(halved_quickstart(tmp_path))]) == 3
    out = capsys.readouterr().out
    table = [line for line in out.splitlines()
             if line.startswith("| dispatch=") and "| reply_rate_rps |" in line]
    assert len(table) == 6 and all("| -50.0 % |" in line for line in table), table
    geomean = re.search(r"^\| reply_rate_rps \| geomean of 6 point\(s\) \| ([\d,]+) \| ([\d,]+) "
                        r"\| -50\.0 % \|$", out, re.MULTILINE)
    assert geomean, out
    base, cand = (int(value.replace(",", "")) for value in geomean.groups())
    assert abs(cand - base / 2) <= 1
    assert "0 regression(s)" in out and "no noise record" in out
    advice = next(line for line in out.splitlines()
                  if line.startswith("- inconclusive: reply_rate_rps"))
    assert "runs per side would decide it" in advice and "wanbench noise" in advice


def test_two_runs_that_differ_while_their_repetitions_agree_are_not_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two runs of one kernel minutes apart, server CPU +25 % (4.89 -> 6.14 in the issue) while
    each run's repetitions agree to 0.05 %: the repetitions say nothing about how far a second
    run moves, so one run per side without a known run-to-run term cannot be a regression."""
    base = make_run(seed=1, noise=Noise(cv=0.0005)).write(tmp_path)
    cand = make_run(seed=2, noise=Noise(cv=0.0005), effect=Effect(cpu=6.14 / 4.89)
                    ).write(tmp_path)
    assert _compare([str(base), str(cand), "--metric", "cpu_server_pct"]) == 3
    out = capsys.readouterr().out
    assert "0 regression(s)" in out and "runs per side" in out


def test_one_run_per_side_with_a_noise_record_beside_the_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`wanbench noise` over 10 A/A runs writes noise.json beside them; compare finds it and
    judges one run per side: a 20 % drop is a regression, an A/A pair is not."""
    history = _runs(tmp_path, range(100, 110))
    assert _noise(history) == 0
    assert "written to" in capsys.readouterr().out
    assert (tmp_path / SCENARIO / noise.RECORD_FILE).is_file()
    base = make_run(seed=1).write(tmp_path)
    slower = make_run(seed=2, kernel="6.19.0-cand", effect=Effect(throughput=0.8)
                      ).write(tmp_path)
    same = make_run(seed=3).write(tmp_path)
    assert _compare([str(base), str(slower), "--metric", "reply_rate_rps"]) == 1
    out = capsys.readouterr().out
    assert "run-to-run term: noise record of 10 A/A runs of synthetic-compare on vm" in out
    assert "12 regression(s)" in out
    assert _compare([str(base), str(same), "--metric", "reply_rate_rps"]) in (0, 3)
    assert "0 regression(s)" in capsys.readouterr().out


def test_a_noise_record_of_another_experiment_is_refused_if_given_and_unused_if_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    longer = _runs(tmp_path / "history", range(100, 103), duration_s=10)
    record = tmp_path / "longer.json"
    assert _noise([*longer, "--out", str(record)]) == 0
    base, cand = _pair(tmp_path / "now")
    argv = [str(base), str(cand), "--metric", "reply_rate_rps"]
    assert _compare([*argv, "--noise", str(record)]) == 2
    err = capsys.readouterr().err
    assert "does not describe the base run" in err and "scenario duration_s: 10.0 -> 5.0" in err
    shutil.copy(record, base.parent / noise.RECORD_FILE)
    assert _compare(argv) == 3
    captured = capsys.readouterr()
    assert "not used, it describes other runs" in captured.err
    assert "no noise record" in captured.out


# -- several runs per side --------------------------------------------------------------------


def test_three_runs_per_side_find_a_drop_naming_kernels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _compare([*_three_per_side(tmp_path, Effect(throughput=0.8)),
                     "--metric", "reply_rate_rps"]) == 1
    out = capsys.readouterr().out
    assert "## base 6.18.0-base vs candidate 6.19.0-cand" in out
    assert "3 runs x 3 repetition(s) x 5 s" in out
    row = next(line for line in out.splitlines()
               if line.startswith("| dispatch=select, cold_conns=1000 | reply_rate_rps |"))
    assert "| 3 / 3 |" in row and "| regression |" in row
    assert "12 regression(s)" in out and "run-to-run term: no noise record" in out


def test_a_folder_of_runs_is_a_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _three_per_side(tmp_path, Effect(throughput=0.8))
    assert _compare([str(tmp_path / "base"), str(tmp_path / "cand"),
                     "--metric", "reply_rate_rps"]) == 1
    assert "base 6.18.0-base: 3 runs" in capsys.readouterr().out


def test_three_runs_per_side_of_one_kernel_are_not_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _runs(tmp_path, range(1, 4), noise=Noise(run_cv=0.02))
    cand = _runs(tmp_path, range(4, 7), noise=Noise(run_cv=0.02))
    assert _compare([*base, "--", *cand, "--metric", "reply_rate_rps"]) in (0, 3)
    assert "0 regression(s)" in capsys.readouterr().out


def test_several_candidate_sides_against_one_base(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _runs(tmp_path, range(1, 4))
    same = _runs(tmp_path, range(4, 7), "6.19.0-a")
    slower = _runs(tmp_path, range(7, 10), "6.19.0-b", effect=Effect(throughput=0.8))
    assert _compare([*base, "--", *same, "--", *slower, "--metric", "reply_rate_rps"]) == 1
    out = capsys.readouterr().out
    assert "vs candidate 6.19.0-a" in out and "vs candidate 6.19.0-b" in out
    assert out.count("0 regression(s)") == 1 and "12 regression(s)" in out


@pytest.mark.parametrize("argv, message", [
    (["A", "--"], "a side with no run"),
    (["--", "A"], "a side with no run"),
    (["A", "--", "--", "B"], "a side with no run"),
    (["A"], "give a base and at least one candidate"),
])
def test_a_side_without_runs_is_an_error(argv: list[str], message: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert _compare(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_side_of_two_kernels_is_refused(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    base = [*_runs(tmp_path, range(1, 3)), *_runs(tmp_path, range(3, 4), "6.18.1-other")]
    cand = _runs(tmp_path, range(4, 6), "6.19.0-cand")
    assert _compare([*base, "--", *cand]) == 2
    assert "a side is the runs of one kernel" in capsys.readouterr().err


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
    argv = _three_per_side(tmp_path, Effect(throughput=1.3), noise=Noise(run_cv=0.002))
    assert _compare([*argv, "--metric", "reply_rate_rps"]) == 0


def test_per_metric_detect_and_min_effect(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*_three_per_side(tmp_path, Effect(cpu=1.02), noise=Noise(cv=0.001, run_cv=0.001)),
            "--metric", "cpu_server_pct"]
    # +0.7 to +2 points of CPU: regressions at 1 point (the default), not at 3
    assert _compare(argv) == 1
    assert "cpu_server_pct 1 pp" in capsys.readouterr().out
    assert _compare([*argv, "--min-effect", "cpu_server_pct=3"]) in (0, 3)
    assert "cpu_server_pct 3 pp" in capsys.readouterr().out
    assert _compare([*argv, "--metric", "reply_rate_rps", "--detect", "1.5"]) == 2


# -- invalid points: every one shown, with its reason; --allow-invalid judges them ----------


def _with_invalid_point(tmp_path: Path, sides: str, seeds: tuple[int, int] = (1, 2)
                        ) -> tuple[Path, Path]:
    """A base and a candidate run whose first point is invalid on the given sides."""
    runs = []
    for role, seed, kernel in (("base", seeds[0], "6.18.0-base"),
                               ("candidate", seeds[1], "6.19.0-cand")):
        run = make_run(seed=seed, kernel=kernel)
        if role in sides:
            late = run.points["point_id"] == run.points["point_id"].iloc[0]
            run.points.loc[late, "valid"] = False
            run.points.loc[late, "invalid_reason"] = (
                "late sends: 3,310 of 119,877 (2.8 %) over 1 ms; the generator fell behind")
        runs.append(run.write(tmp_path))
    return runs[0], runs[1]


def test_a_point_invalid_in_one_run_is_shown_with_its_reason_not_as_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, cand = _with_invalid_point(tmp_path, "candidate")
    assert _compare([str(base), str(cand), "--metric", "reply_rate_rps"]) == 3
    out = capsys.readouterr().out
    assert "present in only one run" not in out and "only in the" not in out
    (row,) = [line for line in out.splitlines()
              if line.startswith("| dispatch=select, cold_conns=0 |")]
    assert "(invalid)" in row and "| invalid |" in row and "candidate 3 of 3: left out" in row
    # by the rule it broke (its code): "the generator fell behind" is the late-sends
    # sentence's own ending, not a second rule
    assert ("- invalid repetitions at dispatch=select, cold_conns=0: candidate: late sends\n"
            in out)
    assert "1 invalid (not judged)" in out


def test_a_point_invalid_in_both_runs_is_listed_and_allow_invalid_judges_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, cand = _with_invalid_point(tmp_path, "base candidate")
    argv = [str(base), str(cand), "--metric", "reply_rate_rps", "--format", "json"]
    _compare(argv)
    (row,) = [r for r in json.loads(capsys.readouterr().out)["candidates"][0]["rows"]
              if r["point"] == "dispatch=select, cold_conns=0"]
    assert (row["verdict"], row["judged"]) == ("invalid", False)
    assert row["invalid"] == "base 3 of 3, candidate 3 of 3: left out"
    assert row["change"] is not None  # the values are shown even so
    _compare([*argv, "--allow-invalid"])
    (row,) = [r for r in json.loads(capsys.readouterr().out)["candidates"][0]["rows"]
              if r["point"] == "dispatch=select, cold_conns=0"]
    assert row["judged"] and row["verdict"] != "invalid"
    assert row["invalid"].endswith("judged (--allow-invalid)")


def test_points_only_in_one_run_are_named(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    base = make_run(seed=1).write(tmp_path)
    fewer = make_run(seed=2, kernel="6.19.0-cand")
    dropped = fewer.points["point_id"] == fewer.points["point_id"].iloc[0]
    fewer.points = fewer.points[~dropped]
    _compare([str(base), str(fewer.write(tmp_path)), "--metric", "reply_rate_rps"])
    assert ("1 point(s) only in the base run(s), not compared: dispatch=select, cold_conns=0"
            in capsys.readouterr().out)


# -- formats --------------------------------------------------------------------------------


def test_json_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _compare([*_three_per_side(tmp_path, Effect(throughput=0.5)), "--format", "json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert (document["verdict"], document["exit_code"]) == ("regression", 1)
    assert len(document["base"]["run_ids"]) == 3
    (candidate,) = document["candidates"]
    reply = [r for r in candidate["rows"] if r["metric"] == "reply_rate_rps"]
    assert len(reply) == 12
    assert all(r["ci_low"] < r["change"] < r["ci_high"] for r in reply)
    assert all(r["change"] == pytest.approx(-0.5, abs=0.02) for r in reply)
    assert all(r["noise"] == "runs" and r["runs_base"] == 3 for r in reply)


def test_csv_report(tmp_path: Path) -> None:
    out = tmp_path / "report.csv"
    assert _compare([*_three_per_side(tmp_path, Effect(throughput=0.5)), "--format", "csv",
                     "--out", str(out)]) == 1
    rows = pd.read_csv(out)
    assert {"point", "metric", "change", "ci_low", "ci_high", "q", "detectable", "verdict",
            "runs_needed", "judged", "candidate_runs"} <= set(rows.columns)
    assert (rows.loc[rows["metric"] == "reply_rate_rps", "verdict"] == "regression").all()


def test_html_report(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    argv = [*_three_per_side(tmp_path, Effect(latency=3.0)), "--format", "html", "--out",
            str(out), "--metric", "resp_time_mean_ms"]
    assert _compare(argv) == 1
    text = out.read_text()
    # the verdict before anything else, in its colour; every row in its verdict's colour
    assert text.index("id='verdict' class='verdict regression'") < text.index("<table")
    assert text.count("<tr class='regression'>") == 12
    # the runs themselves, overlaid: each figure drawn beside the page, each kernel a series
    figures = re.findall(r"src='(figures/[^']+\.png)'", text)
    assert figures and all((tmp_path / f).stat().st_size > 0 for f in figures)
    runs = read_runs([tmp_path / "base", tmp_path / "cand"])
    (spec, *_) = applicable(runs)
    series = set(prepare(spec, runs).frame["series"])
    assert any("6.19.0-cand" in s for s in series) and any("6.18.0-base" in s for s in series)


@pytest.mark.parametrize("candidates", [1, 2])
def test_html_report_with_out_for_runs_of_one_kernel(tmp_path: Path, candidates: int) -> None:
    """Runs of one kernel are told apart by run id in the overlaid figures (the per-second
    figure crashed: 'The column label run_id is not unique')."""
    runs = [make_run(seed=s, repetitions=2).write(tmp_path) for s in range(1, candidates + 2)]
    out = tmp_path / "report.html"
    assert _compare([*map(str, runs), "--format", "html", "--out", str(out)]) != 2
    text = out.read_text()
    figures = re.findall(r"src='(figures/[^']+\.png)'", text)
    assert any("timeseries" in f for f in figures), figures
    assert "class='verdict inconclusive'" in text and "class='regression'" not in text


# -- a pull request's comment: verdict first, undecided rows folded ------------------------


def _markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    _compare(argv)
    return capsys.readouterr().out


def test_markdown_puts_the_verdict_first_and_folds_undecided_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One run per side, a point invalid in the candidate: nothing decided, so the comment
    opens with the verdict and every row is folded, invalid and inconclusive apart."""
    base, cand = _with_invalid_point(tmp_path, "candidate")
    out = _markdown(tmp_path, capsys, [str(base), str(cand), "--metric", "reply_rate_rps"])
    lines = out.splitlines()
    assert lines[2] == "**verdict: inconclusive** (exit 3)"
    assert "No row was judged a regression, an improvement or unchanged (~)." in out
    assert "<details><summary>11 row(s) inconclusive" in out
    assert "<details><summary>1 row(s) invalid: a side has no valid repetition" in out
    invalid = out.split("<details><summary>1 row(s) invalid")[1].split("</details>")[0]
    assert "| dispatch=select, cold_conns=0 | reply_rate_rps | 1 / 0 |" in invalid
    assert "- invalid repetitions at dispatch=select, cold_conns=0: candidate: late sends" \
        in invalid
    # nothing was tested: no "over 0 test(s)" and no power "at 0.05/0"
    assert "0 test(s)" not in out and "/0)" not in out
    assert "No row could be tested, so no row has an interval, a q or a `~`" in out
    # the geometric mean leaves the invalid point out
    assert "| reply_rate_rps | geomean of 11 point(s) |" in out


def test_markdown_shows_decided_rows_with_n_and_says_which_interval_is_adjusted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _markdown(tmp_path, capsys, [*_three_per_side(tmp_path, Effect(throughput=0.8)),
                                       "--metric", "reply_rate_rps"])
    assert out.splitlines()[2] == "**verdict: regression** (exit 1)"
    assert "<details>" not in out  # every row decided: nothing folded
    header = next(line for line in out.splitlines() if line.startswith("| point |"))
    assert "| n |" in header and "| change [95 % CI, unadjusted] |" in header
    assert "| q (adjusted) |" in header
    assert "not adjusted for the grid's 12 tests" in out
    assert "Benjamini-Hochberg over 12 tests); q decides" in out
    geomean = next(line for line in out.splitlines() if "geomean of 12 point(s)" in line)
    assert "| -20." in geomean or "| -19." in geomean, geomean


def test_csv_numbers_are_formatted_and_an_absurd_detectable_size_is_inf(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One run per side with a noise record of 3 runs: regressions of 10^13 % were printed."""
    assert _noise(_runs(tmp_path, range(100, 103), noise=Noise(run_cv=0.5))) == 0
    base, cand = _pair(tmp_path)
    capsys.readouterr()
    _compare([str(base), str(cand), "--format", "csv"])
    text = capsys.readouterr().out
    rows = pd.read_csv(StringIO(text))
    detectable = rows.loc[rows["scale"] != "points", "detectable"].dropna()
    assert (detectable == float("inf")).any()  # this record is too noisy to detect much
    assert ((detectable <= render.MDE_SHOWN) | (detectable == float("inf"))).all()
    digits = [n.replace(".", "").lstrip("0") for n in re.findall(r"\d+\.\d+", text)]
    assert digits and max(map(len, digits)) <= 6  # 6 significant digits, not numpy's repr
    assert not re.search(r"e\+\d", text)


def test_numbers_for_people() -> None:
    assert render.human(39940.0) == "39,940"
    assert render.human(15340.0) == "15,340"
    assert render.human(99.61) == "99.6"
    assert render.human(0.17315) == "0.173"
    assert render.human(float("nan")) == "—"
    assert render.percent(-0.4983) == "-49.8"
    assert render.percent(9.0) == "+900.0"
    assert render.percent(25.0) == "+2,500"
    # the figures' tables on the page (saturation, regressions ...) too
    cells = table_html(pd.DataFrame({"saturation_rps": [15340.0], "slope": [0.000123]}))
    assert "15,340" in cells and "0.000123" in cells and "e+0" not in cells and "e-0" not in cells


def test_help_documents_sides_and_exit_codes() -> None:
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
                 "3  inconclusive", "BASE... -- CAND... [-- CAND...]", "--noise FILE",
                 "--allow-invalid"):
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


def test_runs_of_one_side_that_are_different_experiments_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = [*_runs(tmp_path, range(1, 3)), *_runs(tmp_path / "long", range(3, 4),
                                                   duration_s=10)]
    cand = _runs(tmp_path, range(4, 6), "6.19.0-cand")
    assert _compare([*base, "--", *cand]) == 2
    assert "are different experiments: scenario duration_s" in capsys.readouterr().err


def test_repetitions_may_differ(tmp_path: Path) -> None:
    base = make_run(seed=1, repetitions=3).write(tmp_path)
    cand = make_run(seed=2, kernel="6.19.0-cand", repetitions=5).write(tmp_path)
    assert _compare([str(base), str(cand), "--metric", "reply_rate_rps"]) in (0, 3)


# -- wanbench noise -------------------------------------------------------------------------


def test_noise_records_spread_date_machine_and_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = _runs(tmp_path, range(10, 14), noise=Noise(run_cv=0.03))
    out = tmp_path / "aa.json"
    assert _noise([*runs, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "noise record: 4 A/A runs of synthetic-compare on vm" in printed
    assert re.search(r"reply_rate_rps: 12 point\(s\), 4 runs each, a run's value moves by "
                     r"[\d.]+ % to [\d.]+ % \(sd\)", printed), printed
    assert re.search(r"cpu_server_pct: 12 point\(s\).* pp to [\d.]+ pp", printed), printed
    record = noise.read(out)
    assert (record.scenario_name, record.hostname, record.cpu_count) == (SCENARIO, "vm", 2)
    assert record.recorded_at[:4] >= "2026" and record.first_run_at <= record.last_run_at
    assert len(record.run_ids) == 4
    reply = [s for s in record.spreads if s.metric == "reply_rate_rps"]
    assert {s.runs for s in reply} == {4} and all(s.variance > 0 for s in reply)


@pytest.mark.parametrize("problem, message", [
    ("two", "2 run(s) given; a run-to-run spread needs at least 3 runs"),
    ("kernels", "is not an A/A run of"),
    ("experiments", "scenario duration_s: 5.0 -> 10.0"),
    ("missing", "no such directory"),
    ("not-a-record", "not one `wanbench noise` wrote"),
])
def test_noise_refuses_what_is_not_a_set_of_aa_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], problem: str, message: str
) -> None:
    runs = _runs(tmp_path, range(1, 3))
    if problem == "kernels":
        runs += _runs(tmp_path, range(3, 4), "6.19.0-cand")
    if problem == "experiments":
        runs += _runs(tmp_path / "long", range(3, 4), duration_s=10)
    if problem == "missing":
        runs += [str(tmp_path / "nope")]
    if problem == "not-a-record":
        (tmp_path / "bad.json").write_text("{}")
        code = _compare([*runs, "--noise", str(tmp_path / "bad.json")])
    else:
        code = _noise(runs)
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_noise_refuses_a_record_that_covers_no_point(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record that holds no point would let `compare` believe it knows the noise; the same
    runs with valid points make one (test_noise_records_spread_date_machine_and_scenario)."""
    runs = []
    for seed in range(1, 4):
        run = make_run(seed=seed)
        run.points["valid"] = False
        run.points["invalid_reason"] = "late sends: 9,310 of 119,877 (7.8 %) over 1 ms"
        runs.append(str(run.write(tmp_path)))
    out = tmp_path / "aa.json"
    assert _noise([*runs, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no point has valid repetitions in 3 or more of the 3 runs" in err
    assert err.count("\n") == 1 and not out.exists()


# -- errors: exit 2, one line, never a traceback -------------------------------------------


def _error(tmp_path: Path, problem: str) -> list[str]:
    base, cand = _pair(tmp_path)
    if problem == "missing":
        return [str(base), str(tmp_path / "nope")]
    if problem == "not-a-run":
        (tmp_path / "empty").mkdir()
        return [str(base), str(tmp_path / "empty")]
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
    if problem == "missing-noise":
        return [str(base), str(cand), "--noise", str(tmp_path / "nope.json")]
    if problem == "unwritable-out":
        return [str(base), str(cand), "--out", str(tmp_path / "no" / "such" / "dir.md")]
    if problem == "no-candidate":
        return [str(base)]
    raise AssertionError(problem)


ERRORS = ["missing", "not-a-run", "bad-manifest", "different-scenarios", "no-common-points",
          "same-run", "bad-format", "bad-metric", "unmeasured-metric", "bad-alpha",
          "bad-detect", "missing-noise", "unwritable-out", "no-candidate"]


@pytest.mark.parametrize("problem", ERRORS)
def test_errors_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     problem: str) -> None:
    argv = _error(tmp_path, problem)
    assert _compare(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("wanbench compare: ")
    assert "Traceback" not in err


def test_error_messages_name_problem_and_fix(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    expectations = {
        "missing": "no such directory; give a run directory",
        "different-scenarios": "different scenarios",
        "no-common-points": "compare runs of the same sweep",
        "same-run": "is a base run itself; give a different candidate",
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
    argv = _three_per_side(tmp_path, Effect(throughput=0.8))
    done = subprocess.run([sys.executable, "-m", "harness.cli", "compare", *argv,
                           "--metric", "reply_rate_rps"], capture_output=True, text=True,
                          timeout=120, cwd=REPO)
    assert done.returncode == 1, done.stderr
    assert "12 regression(s)" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "harness.cli", "compare", *argv,
                          "--format", "pdf"], capture_output=True, text=True, timeout=120,
                         cwd=REPO)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_a_noise_record_does_not_judge_invalid_repetitions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record measured valid repetitions; invalid ones judged with --allow-invalid move
    further (interference) and must not borrow its calm: on real A/A pairs they made 4 of 12
    exit 1. Their rows do without it; the valid points keep it."""
    assert _noise(_runs(tmp_path, range(100, 110))) == 0
    capsys.readouterr()
    base = make_run(seed=1).write(tmp_path)
    cand = make_run(seed=2, effect=Effect(throughput=0.7, points=(0,)))
    late = cand.points["point_id"] == cand.points["point_id"].iloc[0]
    cand.points.loc[late, "valid"] = False
    cand.points.loc[late, "invalid_reason"] = "late sends: 9,310 of 119,877 (7.8 %) over 1 ms"
    argv = [str(base), str(cand.write(tmp_path)), "--metric", "reply_rate_rps", "--format",
            "json", "--allow-invalid"]
    assert _compare(argv) == 3
    rows = {r["point"]: r for r in json.loads(capsys.readouterr().out)["candidates"][0]["rows"]}
    late_row = rows.pop("dispatch=select, cold_conns=0")
    assert late_row["verdict"] == "inconclusive" and late_row["noise"] is None
    assert "invalid repetitions entered (--allow-invalid)" in late_row["reason"]
    assert all(row["noise"] == "noise record" for row in rows.values())
