"""`wanbench reproduce --check`: a verdict per target from the runs given, exit 1 on a FAIL,
and REPRODUCTION.md's status table generated between its markers."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.commands import reproduce as command
from harness.metrics import ktrace, perf
from harness.reproduce import beyond
from harness.reproduce.status import BEGIN, END
from tests.analysis.conftest import run_command
from tests.analysis.synthetic import make_points, write_run

FIG8 = "bmd99-fig8-reply-rate-vs-cold"


def write_fig8(root: Path, select_falls: bool) -> Path:
    points = make_points(FIG8, {"dispatch": ["select", "epoll"], "cold_conns": [0, 2000]},
                         noise=0.0)
    points["reply_rate_rps"] = 50_000.0
    if select_falls:
        at_2000 = (points["dispatch"] == "select") & (points["cold_conns"] == 2000)
        points.loc[at_2000, "reply_rate_rps"] = 20_000.0
    write_run(root, points)
    return root


def check(argv: list[str], capsys) -> tuple[int, str]:
    code = run_command("harness.commands.reproduce", ["reproduce", "--check", *argv])
    return code, capsys.readouterr().out


def test_the_papers_shape_passes_and_the_other_targets_are_not_run(tmp_path, capsys):
    code, out = check([str(write_fig8(tmp_path, select_falls=True))], capsys)
    assert code == 0, out
    assert out.splitlines()[0].startswith("NOT RUN")  # bm98-fig1: no run given
    line = next(ln for ln in out.splitlines() if "bmd99-fig8:" in ln)
    assert line.startswith("PASS")
    assert "1 PASS" in out.splitlines()[-1]


def test_a_flat_select_fails_and_exits_1(tmp_path, capsys):
    code, out = check([str(write_fig8(tmp_path, select_falls=False))], capsys)
    assert code == 1
    line = next(ln for ln in out.splitlines() if "bmd99-fig8:" in ln)
    assert line.startswith("FAIL")
    assert "[FAIL] select is not independent of cold connections" in out
    assert "at cold_conns=2000 / at 0 = 1 (rounds 1-1, 3 of 3 beyond the bound) ✗" in out


def test_a_claim_about_what_linux_lacks_is_not_possible_here(tmp_path, capsys):
    points = make_points("cm01-fig3-5-vs-connections", {
        "dispatch": ["select", "devpoll", "rtsig"], "cold_conns": [200, 2950],
        "offered_rate_rps": [500.0]}, noise=0.0)
    write_run(tmp_path, points)
    _, out = check([str(tmp_path)], capsys)
    assert ("[NOT POSSIBLE HERE] /dev/poll's server CPU grows with connections "
            "(CM01 §3.1.2, Fig. 4): /dev/poll (Solaris") in out


@pytest.mark.parametrize("tracing,status", [(False, "NOT POSSIBLE HERE"), (True, "NOT RUN")])
def test_an_unrun_target_needing_the_kernel_traced_depends_on_the_machine(
        tmp_path, capsys, monkeypatch, tracing, status):
    """cpp Fig 4: its stack needs kernel_trace, its instructions hardware counters."""
    monkeypatch.setattr(perf, "hardware_counters", lambda: (False, "probe says so"))
    monkeypatch.setattr(ktrace, "support", lambda: ktrace.Support(tracing, False, "no BPF"))
    _, out = check([str(write_fig8(tmp_path, select_falls=True))], capsys)
    line = next(ln for ln in out.splitlines() if "cpp-fig4:" in ln)
    assert line.startswith(status)
    if not tracing:
        assert "eBPF tracing of the kernel (no BPF)" in out
        assert "hardware counters (probe says so)" in out


def test_status_table_is_written_between_the_markers(tmp_path, capsys):
    results = write_fig8(tmp_path / "results", select_falls=True)
    status = tmp_path / "REPRODUCTION.md"
    status.write_text(f"# Reproduction\nprose stays\n{BEGIN}\nold table\n{END}\nmore prose\n")
    code, out = check([str(results), "--write-status", str(status)], capsys)
    assert code == 0
    text = status.read_text()
    assert "old table" not in text and text.startswith("# Reproduction\nprose stays\n")
    assert text.endswith(f"{END}\nmore prose\n")
    row = next(ln for ln in text.splitlines() if ln.startswith("| Banga, Mogul & Druschel 1999, "
                                                                "Fig. 8"))
    assert "**PASS**" in row and "[PASS] select is not independent" in row


@pytest.mark.parametrize("content", ["# no markers here\n", f"{END}\n{BEGIN}\n"])
def test_a_status_file_without_markers_is_refused(tmp_path, capsys, content):
    status = tmp_path / "REPRODUCTION.md"
    status.write_text(content)
    code = run_command("harness.commands.reproduce",
                       ["reproduce", "--check", str(write_fig8(tmp_path / "r", True)),
                        "--write-status", str(status)])
    assert code == 2
    assert "no generated-block markers" in capsys.readouterr().err
    assert status.read_text() == content


def test_missing_results_or_no_check_flag_exit_2(tmp_path, capsys):
    assert run_command("harness.commands.reproduce",
                       ["reproduce", "--check", str(tmp_path / "nope")]) == 2
    assert "no such run directory" in capsys.readouterr().err
    assert run_command("harness.commands.reproduce", ["reproduce", str(tmp_path)]) == 2
    assert "say --run (run the scenarios), --check" in capsys.readouterr().err



def test_beyond_runs_the_sweeps_beyond_the_papers_and_excludes_only(tmp_path, monkeypatch,
                                                                      capsys):
    asked = {}

    def fake(out, quick, allow_dirty, only, display):
        asked["only"] = only
        return {"scenarios": [{"scenario": name} for name in only], "seconds": 60.0,
                "budget_s": 2100, "revision": "r", "revisions": ["r"], "finished": True}

    monkeypatch.setattr(command, "reproduce", fake)
    assert main(["reproduce", "--run", "--beyond", "-q", str(tmp_path)]) == 0
    assert asked["only"] == list(beyond.SCENARIOS)
    assert f"ran {len(beyond.SCENARIOS)} scenarios" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["reproduce", "--run", "--beyond", "--only", "x", str(tmp_path)])
    assert "not allowed with argument" in capsys.readouterr().err
