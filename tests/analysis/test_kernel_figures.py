"""The papers' kernel-cost figures draw what their checks judge (the in-kernel columns of
wb-ktrace and derive's kernel_* metrics), with the paper's values on the same axis where the
units agree, and say "not measured", and why, where a run has no in-kernel values."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from harness.analysis import derive
from harness.analysis.figures import BY_ID, CPU_TIME_SHARE
from harness.analysis.plots import draw
from harness.analysis.prepare import FigureData, Skipped, prepare
from harness.results.runset import read_runs

from .synthetic import make_points, write_run

# Each kernel-cost target: its scenario, the metric its check judges (harness/reproduce/
# claims/) and, for figures by layer, the layers that check compares.
JUDGED = {
    "bm98-fig1": ("bm98-fig1-select-cpu-vs-cold", CPU_TIME_SHARE, ()),
    "bm98-table1-2": ("bm98-table1-profile", CPU_TIME_SHARE, ()),
    "bmd99-table2": ("bmd99-table2-profile", CPU_TIME_SHARE, ()),
    "bm98-ufalloc": ("bm98-ufalloc", "kernel_accept_ns_per_call", ()),
    "cpp-fig4": ("cpp-fig4-cpp-vs-bandwidth", "kernel_stack_ns_per_packet", ()),
    "cpp-fig5": ("cpp-fig5-cpp-vs-connections", derive.KERNEL_LAYER_NS,
                 ("whole stack", "System Call layer")),
    "cpp-fig6": ("cpp-fig6-cpp-vs-latency", derive.KERNEL_LAYER_NS,
                 ("receive softirq", "System Call layer")),
    "cpp-table1": ("cpp-table1-layers", derive.KERNEL_LAYER_SHARE, ("System Call layer",)),
}
NO_BPF = {"tracepoints": False, "fentry": False,
          "detail": "bpf(BPF_PROG_LOAD): Operation not permitted; fix: run as root"}


def _prepared(tmp_path: Path, spec_id: str, **make: object) -> FigureData:
    scenario = JUDGED[spec_id][0]
    trace = make.pop("manifest_trace", None)
    points = make_points(scenario, repetitions=2, **make)
    result = prepare(BY_ID[spec_id], read_runs([write_run(tmp_path, points,
                                                          kernel_trace=trace)]))
    assert isinstance(result, FigureData), result
    return result


def _expected(points: pd.DataFrame, spec_id: str, metric: str) -> pd.Series:
    """The check's metric, median over repetitions per point, from derive alone."""
    spec = BY_ID[spec_id]
    derived = derive.add_derived(points)
    if metric in (derive.KERNEL_LAYER_NS, derive.KERNEL_LAYER_SHARE):
        derived = derive.kernel_layers(derived)
    by = [c for c in (*spec.series, spec.x) if c in derived.columns]
    return derived.groupby(by)[metric].median()


@pytest.mark.parametrize("spec_id", sorted(JUDGED))
def test_each_kernel_cost_figure_draws_the_metric_its_check_judges(tmp_path: Path,
                                                                  spec_id: str) -> None:
    scenario, metric, layers = JUDGED[spec_id]
    data = _prepared(tmp_path, spec_id)
    drawn = data.frame[data.frame["metric"] == metric]
    assert not drawn.empty and not data.unavailable.get(metric)
    assert drawn["median"].notna().all()
    # the values drawn are derive's, point by point (medians over the repetitions)
    expected = _expected(make_points(scenario, repetitions=2), spec_id, metric)
    assert sorted(drawn["median"]) == pytest.approx(sorted(expected.dropna()))
    for layer in layers:
        assert f"layer={layer}" in set(drawn["series"]), set(drawn["series"])
    # nothing the check no longer judges: no profile shares, no estimated cycles
    assert not {"select_cpu_pct", "pct", "cycles_per_packet", "cpu_us_per_conn"} & set(
        data.frame["metric"])


@pytest.mark.parametrize(("manifest_trace", "said"), [
    (None, "not measured: the run did not trace the kernel (kernel_trace: false"),
    (NO_BPF, "not measured: eBPF could not run where the run was made (bpf(BPF_PROG_LOAD): "
             "Operation not permitted; fix: run as root)"),
])
@pytest.mark.parametrize("spec_id", sorted(JUDGED))
def test_without_kernel_columns_the_figure_says_not_measured_and_why(
    tmp_path: Path, spec_id: str, manifest_trace: dict | None, said: str
) -> None:
    metric = JUDGED[spec_id][1]
    data = _prepared(tmp_path, spec_id, kernel_trace=False, manifest_trace=manifest_trace)
    assert data.unavailable[metric].startswith(said)
    # nothing drawn as if it were measured (a table's idle time was, beside it)
    assert data.frame[data.frame["metric"] == metric].empty
    assert any(note.startswith(said) for note in data.notes)
    # the panel of the check's metric says it on the figure itself: a table's, under its bars
    figure = draw(data)
    spec = BY_ID[spec_id]
    if spec.kind == "bars":
        panel = figure.axes[0]
        assert panel.xaxis.label.get_text().replace("\n", " ").startswith(said)
        assert "not measured" in {t.get_text() for t in panel.texts}
    else:
        panel = figure.axes[spec.y.index(metric)]
        assert " ".join(t.get_text() for t in panel.texts).replace("\n", " ").startswith(said)


def test_a_traced_run_without_values_says_the_trace_came_back_empty(tmp_path: Path) -> None:
    points = make_points("bmd99-table2-profile", repetitions=2)
    points["kernel_select_calls"] = 0.0
    points["kernel_epoll_wait_calls"] = 0.0
    data = prepare(BY_ID["bmd99-table2"], read_runs([write_run(tmp_path, points)]))
    assert isinstance(data, FigureData)
    assert data.unavailable[CPU_TIME_SHARE].startswith(
        "not measured: no traced values in the run(s)")


def test_a_figure_of_other_metrics_without_values_is_still_skipped(tmp_path: Path) -> None:
    # only in-kernel values have a recorded reason to be absent; other empty figures are
    # skipped with their one line, as before
    points = make_points("cm01-table1-sigio", repetitions=2)
    points[["signals_dequeued", "sigio_overflows"]] = float("nan")
    result = prepare(BY_ID["cm01-table1"], read_runs([write_run(tmp_path, points)]))
    assert isinstance(result, Skipped) and "no values for" in result.reason


@pytest.mark.parametrize(("spec_id", "paper"), [
    ("bm98-fig1", {("all", 2000.0): 53.0}),
    ("bm98-table1-2", {("dispatch=select", 750.0): 21.91}),
    ("bmd99-table2", {("dispatch=select", 750.0): 34.0, ("dispatch=epoll", 750.0): 0.68,
                      ("dispatch=select, kernel_release=Digital UNIX with scalable select()",
                       750.0): 12.02}),
    ("cpp-table1", {("layer=System Call layer", 4.0): 19.77,
                    ("layer=System Call layer", 512.0): 18.61,
                    ("layer=System Call layer", 2048.0): 19.28}),
])
def test_the_papers_shares_sit_on_our_axis_as_printed(tmp_path: Path, spec_id: str,
                                                      paper: dict) -> None:
    data = _prepared(tmp_path, spec_id)
    on_axes = data.paper_on_axes
    on_axes = on_axes[on_axes["metric"] == JUDGED[spec_id][1]]
    drawn = {(s, float(x)): y for s, x, y in on_axes[["series", "x", "y"]].itertuples(index=False)}
    assert {key: drawn[key] for key in paper} == pytest.approx(paper)


@pytest.mark.parametrize(("spec_id", "series", "ratios"), [
    # cycles are not our ns: the paper's change from its first point, from ours
    ("cpp-fig4", "all", {800.0: 1.0, 900.0: 1.185}),
    ("cpp-fig5", "layer=System Call layer", {4.0: 1.0, 2048.0: 3.5}),
    ("cpp-fig5", "layer=whole stack", {4.0: 1.0, 2048.0: 1.347}),
])
def test_the_papers_cycles_are_drawn_as_changes_from_our_first_point(
    tmp_path: Path, spec_id: str, series: str, ratios: dict
) -> None:
    data = _prepared(tmp_path, spec_id)
    ours = data.frame[(data.frame["series"] == series) & data.frame["valid"]].sort_values("x")
    first = ours["median"].iloc[0]
    on_axes = data.paper_on_axes
    mine = on_axes[on_axes["series"] == series]
    assert dict(zip(mine["x"].astype(float), mine["y"], strict=True)) == pytest.approx(
        {x: first * ratio for x, ratio in ratios.items()})
    # on the same panel as ours: one axis, no right-hand one
    assert len(draw(data).axes) == len(BY_ID[spec_id].y)
