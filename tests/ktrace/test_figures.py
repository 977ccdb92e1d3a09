"""The kernel figures of any traced run: the server's dispatch call, whichever it is, in-kernel
ns per call and share of a CPU against each sweep axis; nothing where nothing was traced."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.derive import add_derived
from harness.analysis.generic import point_table, specs_for
from harness.results.runset import read_runs
from tests.analysis.synthetic import make_points, write_run

GRID = {"dispatch": ["select", "epoll"], "cold_conns": [0, 1000]}


def traced(points: pd.DataFrame) -> pd.DataFrame:
    """Select's in-kernel time per call grows with idle connections, epoll_wait's does not."""
    select = points["dispatch"] == "select"
    return points.assign(
        kernel_select_calls=select.map({True: 1000, False: 0}),
        kernel_select_ns_per_call=(1000 + 30 * points["cold_conns"]).where(select),
        kernel_epoll_wait_calls=select.map({True: 0, False: 4000}),
        kernel_epoll_wait_ns_per_call=pd.Series(2000.0, points.index).where(~select),
        kernel_rx_ns_per_packet=3000.0, kernel_trace_window_s=2.0)


def test_the_dispatch_call_is_the_family_the_server_called_most():
    derived = add_derived(traced(make_points("k", GRID, repetitions=1)))
    by_point = derived.set_index(["dispatch", "cold_conns"])
    assert by_point.loc[("select", 1000), "kernel_dispatch_ns_per_call"] == 31_000
    assert by_point.loc[("epoll", 1000), "kernel_dispatch_ns_per_call"] == 2000
    # 1,000 calls of 31 µs over a 2 s window: 1.55 % of one CPU
    assert by_point.loc[("select", 1000), "kernel_dispatch_cpu_pct"] == pytest.approx(1.55)


def test_untraced_points_have_no_dispatch_time():
    derived = add_derived(make_points("k", GRID, repetitions=1))
    assert derived["kernel_dispatch_ns_per_call"].isna().all()
    assert derived["kernel_dispatch_cpu_pct"].isna().all()


@pytest.mark.parametrize("is_traced", [True, False])
def test_a_traced_run_gets_kernel_panels_and_an_untraced_one_none(tmp_path: Path,
                                                                  is_traced: bool):
    points = make_points("k", GRID, repetitions=2)
    runs = read_runs([write_run(tmp_path, traced(points) if is_traced else points)])
    (spec,) = [s for s in specs_for("k", runs) if s.x == "cold_conns"]
    kernel = {"kernel_dispatch_ns_per_call", "kernel_rx_ns_per_packet"}
    assert (kernel <= set(spec.y)) is is_traced
    assert not is_traced or not kernel & set(spec.y[:2])  # after the headline metrics
    table = point_table("k", runs)
    assert ("kernel_dispatch_ns_per_call" in table.columns) is is_traced
    if is_traced:
        select = table[table["dispatch"] == "select"].set_index("cold_conns")
        assert select.loc[1000, "kernel_dispatch_ns_per_call"] == 31_000
        assert not math.isnan(select.loc[0, "kernel_dispatch_ns_per_call"])
