"""The toolkit's one percentile: nearest rank, always an observed value, never interpolated."""

from __future__ import annotations

import pytest

from tsbatch.sla.percentile import percentile


def test_nearest_rank_on_the_textbook_example() -> None:
    values = [15, 20, 35, 40, 50]
    assert percentile(values, 5) == 15
    assert percentile(values, 30) == 20
    assert percentile(values, 40) == 20
    assert percentile(values, 50) == 35
    assert percentile(values, 100) == 50


def test_percentiles_of_1_to_100_are_the_ranks_themselves() -> None:
    values = list(range(100, 0, -1))  # unsorted on purpose
    assert [percentile(values, q) for q in (50, 95, 99, 100)] == [50, 95, 99, 100]


def test_percentile_is_always_an_observed_value_rounded_up() -> None:
    # 10 values: p95 -> rank ceil(9.5) = 10 -> the slowest, not an interpolation.
    values = [1.0] * 9 + [500.0]
    assert percentile(values, 95) == 500.0
    assert percentile(values, 90) == 1.0
    assert percentile([7.25], 99) == 7.25


def test_percentile_keeps_sub_millisecond_precision() -> None:
    assert percentile([0.4, 0.6, 0.8], 50) == 0.6


@pytest.mark.parametrize("q", [-1, 100.5])
def test_percentile_rejects_out_of_range(q: float) -> None:
    with pytest.raises(ValueError):
        percentile([1.0], q)


def test_percentile_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)
