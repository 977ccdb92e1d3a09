"""The suite's own judge of invalid points: what a busy machine explains, and what it does not."""

from __future__ import annotations

from clients.validity import Code
from tests.conftest import busy_machine_explains


def test_a_stall_that_made_sends_late_explains_a_window_read_late_beside_them():
    assert busy_machine_explains((Code.LATE_SENDS, Code.WINDOW_DISAGREES))
    assert busy_machine_explains((Code.STEAL,))
    assert busy_machine_explains((Code.GENERATOR_CROWDED, Code.WINDOW_DISAGREES))


def test_a_window_read_late_alone_or_a_harness_reason_is_not_the_machine():
    assert not busy_machine_explains((Code.WINDOW_DISAGREES,))
    assert not busy_machine_explains((Code.LATE_SENDS, Code.NO_REPLIES))
    assert not busy_machine_explains(())
