"""The point's window: decided once on CLOCK_MONOTONIC, read on other clocks, and the edges
each source used as the record's columns."""

from __future__ import annotations

import asyncio
import time

import pytest

from harness.monotonic import sleep_until
from harness.results import facts, rows
from harness.results import format as results_format
from harness.runner.window import Edges, Window, generator_edges, wall_edges

S = 1_000_000_000


def test_the_window_starts_after_the_warm_up_and_lasts_the_duration():
    window = Window.after(1.5, 3.0, now_ns=10 * S)
    assert window == Window(11_500_000_000, 14_500_000_000)
    assert window.length_s == 3.0
    before = time.monotonic_ns()
    decided = Window.after(0.0, 1.0)
    assert before <= decided.start_ns <= time.monotonic_ns()


def test_a_window_that_does_not_end_after_it_starts_is_refused():
    with pytest.raises(ValueError, match="ends after it starts"):
        Window(5, 5)


def test_another_clock_reads_the_same_interval_shifted_by_its_offset():
    assert Window(10 * S, 12 * S).on_clock(-0.25) == Window(9_750_000_000, 11_750_000_000)


def test_wall_instants_and_monotonic_ones_convert_both_ways():
    """A cluster host reads the run's time.time() window on its CLOCK_MONOTONIC and hands its
    edges back on time.time(): the round trip lands where it started (to a millisecond, the
    two clocks read one after the other)."""
    wall = time.time()
    here = Window.of_wall(wall + 1, wall + 2)
    assert abs(here.start_ns - (time.monotonic_ns() + S)) < 5_000_000
    back = wall_edges(Edges(here.start_ns, here.end_ns))
    assert abs(back.start_ns / S - (wall + 1)) < 1e-3
    assert abs(back.end_ns - back.start_ns - S) < 1000  # s as floats: to the µs


def test_sleeping_until_an_edge_wakes_after_it():
    edge = time.monotonic_ns() + 20_000_000
    asyncio.run(sleep_until(edge))
    assert time.monotonic_ns() >= edge
    asyncio.run(sleep_until(edge - S))  # past: at once


def test_a_generator_document_says_its_edges_or_nothing():
    assert generator_edges({"window": {"start_ns": 5, "end_ns": 9}}) == Edges(5, 9)
    assert generator_edges({"window": None}) is None
    assert generator_edges({}) is None  # an older document, or a driver's


def test_every_source_has_both_edge_columns_declared_and_written():
    row = rows.window_columns(2 * S, 5 * S, {"sampler": Edges(2 * S + 1_500_000, 5 * S - S // 2)})
    assert set(row) == set(results_format.WINDOW_COLUMNS)
    assert row["edge_sampler_start_ms"] == 1.5 and row["edge_sampler_end_ms"] == -500.0
    assert row["edge_generator_start_ms"] is None
    assert facts.edge_offsets_s(row) == {"sampler": (0.0015, -0.5)}
    for column in results_format.WINDOW_COLUMNS:
        assert results_format.column_kind(column) is not None, column
