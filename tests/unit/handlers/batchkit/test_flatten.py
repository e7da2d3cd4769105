"""Flattening the inputs of a batch's requests and regrouping their results (batchkit/flatten.py)."""

from __future__ import annotations

import pytest

from batchkit.errors import InvalidInput
from batchkit.flatten import flatten, regroup


def test_requests_of_mixed_sizes_flatten_in_order_and_regroup_to_their_own_results() -> None:
    flat = flatten([["a"], ["b", "c", "d"], [], ["e", "f"]])
    assert flat.inputs == ["a", "b", "c", "d", "e", "f"]
    assert flat.spans == [range(0, 1), range(1, 4), range(4, 4), range(4, 6)]
    results = [value.upper() for value in flat.inputs]
    assert regroup(results, flat.spans) == [["A"], ["B", "C", "D"], [], ["E", "F"]]


def test_per_input_errors_stay_with_their_request_and_position() -> None:
    bad = InvalidInput.error("bad")
    flat = flatten([["x", "y"], ["z"]])
    grouped = regroup(["X", bad, "Z"], flat.spans)
    assert grouped == [["X", bad], ["Z"]]


def test_a_batch_of_requests_without_inputs_flattens_to_nothing() -> None:
    flat = flatten([[], []])
    assert flat.inputs == []
    assert regroup([], flat.spans) == [[], []]


def test_regroup_refuses_a_result_count_that_does_not_match() -> None:
    flat = flatten([["a", "b"]])
    with pytest.raises(ValueError, match="1 results for 2"):
        regroup(["A"], flat.spans)
