"""Every figure spec renders from synthetic runs (and from results/reference/ when present)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness.analysis.figures import BY_ID, SPECS
from harness.analysis.prepare import FigureData, prepare
from harness.analysis.report import applicable, plot_all
from harness.results.runset import read_runs

from .conftest import run_command
from .synthetic import SCENARIO_GRIDS, make_points, write_run

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "results" / "reference"


def _assert_rendered(out: Path, spec_id: str, suffixes: tuple[str, ...] = ("png", "svg")) -> None:
    for suffix in suffixes:
        path = out / "figures" / f"{spec_id}.{suffix}"
        assert path.is_file() and path.stat().st_size > 0, path


def test_specs_name_known_scenarios() -> None:
    assert {spec.scenario for spec in SPECS} == set(SCENARIO_GRIDS)
    assert len(BY_ID) == len(SPECS)


def test_every_spec_renders_from_synthetic_runs(
    synthetic_results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the PNG the report shows: every spec's SVG is drawn from the reference runs, the PDF
    # on its own (each format is a fifth to a third more of the drawing); the papers' figures
    # only: the generic ones, three in four of the whole, are drawn from real runs of every
    # scenario by the quick pipeline's test and from hand-written sweeps by test_generic_figures
    argv = ["plot", str(synthetic_results), "--out", str(tmp_path), "--jobs", "2",
            "--format", "png", "--figures", "papers"]
    assert run_command("harness.commands.plot", argv) == 0
    assert "skipped" not in capsys.readouterr().out
    report = (tmp_path / "index.html").read_text()
    for spec in SPECS:
        _assert_rendered(tmp_path, spec.id, ("png",))
        assert f"figures/{spec.id}.png" in report
    assert "6.18.0-synthetic" in report  # manifest summary
    assert "x at idle = 0" in report and "x_intercept" not in report  # regression table


def test_reference_results_render(tmp_path: Path) -> None:
    if not REFERENCE.is_dir() or not any(REFERENCE.rglob("manifest.json")):
        pytest.skip(f"no reference results under {REFERENCE} yet")
    runs = read_runs([REFERENCE])
    # the papers' figures, as make reproduce draws them (generic figures of real runs are
    # drawn by the quick pipeline's test; PDF is tested apart)
    results = plot_all(runs, tmp_path, applicable(runs, generic=False), jobs=2,
                       formats=("png", "svg"))
    present = set(runs.manifests["scenario_name"])
    for result in results:
        if result.spec.scenario in present:
            assert isinstance(result, FigureData), f"{result.spec.id}: {result.reason}"
            _assert_rendered(tmp_path, result.spec.id)


def test_only_the_figures_of_the_given_scenarios_are_drawn_or_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path, make_points("bm98-ufalloc", repetitions=2))
    assert run_command("harness.commands.plot", ["plot", str(run)]) == 0
    out = capsys.readouterr().out
    assert "wrote bm98-ufalloc\n" in out
    assert "wrote bm98-ufalloc--cold_conns" in out  # its generic figure
    assert "bmd99-fig8" not in out and "skipped" not in out
    _assert_rendered(run, "bm98-ufalloc")
    assert not (run / "figures" / "bmd99-fig8.png").exists()


# cycles per packet against connections, as a generic figure draws them where there are cycles
CYCLES = replace(BY_ID["cpp-fig5"], y=("cycles_per_packet", "instructions_per_packet"),
                 series=(), source="points")


def test_estimated_cycles_are_labelled_and_instructions_unavailable(tmp_path: Path) -> None:
    run = write_run(tmp_path, make_points("cpp-fig5-cpp-vs-connections", repetitions=2))
    result = prepare(CYCLES, read_runs([run]))
    assert isinstance(result, FigureData)
    assert any("estimated" in note and "not measured" in note for note in result.notes)
    assert result.ylabel_suffix["cycles_per_packet"] == " (estimated)"
    assert "no hardware counters" in result.unavailable["instructions_per_packet"]


def test_measured_counters_are_not_called_estimated(tmp_path: Path) -> None:
    points = make_points("cpp-fig5-cpp-vs-connections", repetitions=2)
    points["cycles_estimated"] = False
    points["instructions_per_packet"] = points["cycles_per_packet"] * 0.6
    result = prepare(CYCLES, read_runs([write_run(tmp_path, points)]))
    assert isinstance(result, FigureData)
    assert not result.ylabel_suffix and not result.unavailable
    assert set(result.frame["metric"]) == {"cycles_per_packet", "instructions_per_packet"}


def test_a_run_of_invalid_points_is_drawn_hollow_not_skipped(tmp_path: Path) -> None:
    # Figures keep invalid points (drawn hollow, reasons in the notes): a run whose every
    # point is invalid still has a figure, with nothing in it drawn as measured.
    points = make_points("bm98-ufalloc", repetitions=2)
    points["valid"] = False
    result = prepare(BY_ID["bm98-ufalloc"], read_runs([write_run(tmp_path, points)]))
    assert isinstance(result, FigureData)
    assert not result.frame["valid"].any() and len(result.frame) == 3
    assert "6 point repetition(s) invalid: no reason recorded (hollow)" in result.notes


def test_an_overload_target_draws_invalid_points_hollow_and_says_why_they_count(
    tmp_path: Path,
) -> None:
    points = make_points("cm01-table1-sigio", repetitions=2)
    points.loc[points.index[::2], "valid"] = False
    result = prepare(BY_ID["cm01-table1"], read_runs([write_run(tmp_path, points)]))
    assert isinstance(result, FigureData)
    drawn = result.frame[result.frame["metric"] == "sigio_overflows"]
    # every record drawn, the invalid ones apart from the valid (hollow), none as valid
    invalid_rates = points.loc[~points["valid"], "request_rate_rps"]
    assert set(drawn.loc[~drawn["valid"], "x"]) == set(invalid_rates)
    assert set(drawn["x"]) == set(points["request_rate_rps"])
    assert any(f"{len(points) // 2} invalid point record(s), hollow" in n
               and BY_ID["cm01-table1"].keep_invalid in n for n in result.notes)


def test_two_kernels_become_two_series(tmp_path: Path) -> None:
    for seed, release in enumerate(("6.1.0", "6.18.0")):
        write_run(tmp_path, make_points("bmd99-fig8-reply-rate-vs-cold", repetitions=2,
                                        seed=seed, kernel_release=release))
    result = prepare(BY_ID["bmd99-fig8"], read_runs([tmp_path]))
    assert isinstance(result, FigureData)
    assert "dispatch=epoll, kernel_release=6.1.0" in set(result.frame["series"])
    assert result.frame["series"].nunique() == 4


def test_plot_of_several_runs_needs_out(synthetic_results: Path) -> None:
    runs = [str(p) for p in sorted(synthetic_results.glob("*/*"))[:2]]
    assert run_command("harness.commands.plot", ["plot", *runs]) == 2


def test_docs_list_every_spec_with_its_scenario() -> None:
    rows = {line.split("|")[1].strip(" `"): line
            for line in (REPO / "docs" / "figures.md").read_text().splitlines()
            if line.startswith("| `")}
    for spec in SPECS:
        row = rows.get(spec.id)
        assert row is not None, f"docs/figures.md lacks {spec.id}"
        assert f"`{spec.scenario}`" in row and f"`{spec.x}`" in row
        assert all(f"`{y}`" in row for y in spec.y), spec.id


def test_a_mechanism_no_linux_has_is_named_on_its_figure(tmp_path: Path) -> None:
    write_run(tmp_path, make_points("cm01-fig6-9-vs-rate"))
    data = prepare(BY_ID["cm01-fig6-9"], read_runs([tmp_path]))
    assert isinstance(data, FigureData)
    assert any("epoll-backed stand-in" in note for note in data.notes), data.notes
    assert any(note.startswith("not in this figure: signal-per-fd") for note in data.notes)
    write_run(tmp_path, make_points("cm01-table1-sigio"))
    other = prepare(BY_ID["cm01-table1"], read_runs([tmp_path]))
    assert isinstance(other, FigureData)
    assert not any(note.startswith("not in this figure") for note in other.notes)
