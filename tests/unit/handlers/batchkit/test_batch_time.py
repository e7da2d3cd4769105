"""A batch's time as a fixed cost plus a cost per input (batchkit/batch_time.py)."""

from __future__ import annotations

import pytest

from batchkit.batch_time import FORGET_AFTER, BatchTimes, Line


def test_nothing_seen_predicts_nothing_and_one_size_predicts_its_time_for_any_batch() -> None:
    times = BatchTimes()
    assert times.line() is None and times.predict_ms(8) == 0.0
    times.observe(1, 10.0)
    times.observe(0, 500.0)  # nothing computed: nothing learnt
    assert times.line() == Line(0.0, 10.0) and times.predict_ms(8) == 10.0


def test_two_sizes_separate_the_fixed_cost_from_the_cost_per_input() -> None:
    times = BatchTimes()
    for _ in range(10):
        times.observe(1, 10.0)
        times.observe(8, 24.0)
    line = times.line()
    assert line is not None
    assert (line.per_input_ms, line.fixed_ms) == (pytest.approx(2.0), pytest.approx(8.0))
    assert times.predict_ms(4) == pytest.approx(16.0) and times.spread_ms() == 0.0


def test_noise_never_gives_a_negative_slope_or_fixed_cost() -> None:
    flat = BatchTimes()
    flat.observe(1, 12.0)
    flat.observe(4, 10.0)
    flat_line = flat.line()
    assert flat_line is not None and flat_line.per_input_ms == 0.0 and 10.0 < flat_line.fixed_ms < 12.0
    steep = BatchTimes()
    steep.observe(1, 1.0)
    steep.observe(2, 10.0)
    line = steep.line()
    assert line is not None and line.fixed_ms == 0.0 and line.per_input_ms > 0


def test_a_size_not_run_for_long_is_forgotten() -> None:
    times = BatchTimes()
    times.observe(8, 80.0)
    for _ in range(FORGET_AFTER + 1):
        times.observe(1, 10.0)
    assert set(times.sizes) == {1}


def test_a_size_no_longer_run_fades_from_the_line() -> None:
    """Bursts of 8 measured while the machine was busy (150 ms), then only small batches at
    their quiet times: the line follows the recent sizes, not the stale burst."""
    times = BatchTimes()
    for _ in range(5):
        times.observe(8, 150.0)
    for _ in range(60):
        times.observe(1, 10.0)
        times.observe(2, 12.0)
    assert times.predict_ms(8) < 40
