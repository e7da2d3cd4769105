"""The pure batch core: per-request decode errors, one run on the valid subset, order kept."""

from __future__ import annotations

import pytest

from batchkit.batching import (
    BatchLengthError,
    check_length,
    decode_each,
    plan_sub_batches,
    run_batch,
    scatter,
    valid_subset,
)
from batchkit.errors import InvalidInput, PayloadTooLarge, RequestError


def decode_number(payload: object) -> int:
    if payload == "big":
        raise PayloadTooLarge("too big")
    if not isinstance(payload, int):
        raise InvalidInput(f"not a number: {payload!r}")
    return payload


def decode_numbers(payloads: list[object]) -> list[int | RequestError]:
    return decode_each(payloads, decode_number)


def test_bad_items_keep_their_own_errors_and_good_ones_their_results_in_order() -> None:
    calls: list[list[int]] = []

    def infer(items: list[int]) -> list[int]:
        calls.append(items)
        return [item * 10 for item in items]

    run = run_batch([1, "x", 3, "big", 5], decode_numbers, infer, lambda out: {"value": out})
    results = run.responses

    assert calls == [[1, 3, 5]], "the model runs once, on the valid subset only"
    assert run.outputs == [10, 30, 50] and run.rejected_inputs == 2
    assert results[0] == {"value": 10} and results[2] == {"value": 30} and results[4] == {"value": 50}
    assert results[1] == RequestError(400, "invalid_input", "not a number: 'x'")
    assert results[3] == RequestError(413, "payload_too_large", "too big")


def test_all_invalid_never_calls_the_model() -> None:
    def infer(items: list[int]) -> list[int]:
        raise AssertionError("must not run")

    run = run_batch(["a", "b"], decode_numbers, infer, str)
    assert [r.status for r in run.responses] == [400, 400]
    assert run.outputs == [] and run.rejected_inputs == 2


def test_model_failure_fails_only_the_valid_items_with_a_5xx() -> None:
    def infer(items: list[int]) -> list[int]:
        raise RuntimeError("CUDA out of memory. Tried to allocate 2 GiB")

    run = run_batch([1, "x", 2], decode_numbers, infer, str)
    results = run.responses
    assert run.outputs == [], "a failed model run has no outputs to report on"
    assert [(r.status, r.code) for r in results] == [
        (503, "resource_exhausted"),
        (400, "invalid_input"),
        (503, "resource_exhausted"),
    ]


def test_model_returning_wrong_count_is_reported_not_scattered() -> None:
    results = run_batch([1, 2, 3], decode_numbers, lambda items: items[:2], str).responses
    assert all(r.code == "inference_failed" for r in results)
    assert "inference returned 2 results for 3 inputs" in results[0].message


def test_unexpected_decode_exception_becomes_a_request_error() -> None:
    def decode(payload: object) -> int:
        raise KeyError("boom")

    decoded = decode_each([1], decode)
    assert isinstance(decoded[0], RequestError) and decoded[0].status == 500


def test_one_failing_encode_fails_only_itself() -> None:
    def encode(out: int) -> str:
        if out == 20:
            raise ValueError("cannot encode")
        return str(out)

    results = run_batch([1, 2, 3], decode_numbers, lambda items: [i * 10 for i in items], encode).responses
    assert results[0] == "10" and results[2] == "30"
    assert results[1].code == "inference_failed"


def test_an_input_rejected_before_decode_stays_rejected_and_is_not_decoded() -> None:
    rejected = InvalidInput.error("input 1 must be a string")
    seen: list[object] = []

    def decode(payload: object) -> int:
        seen.append(payload)
        return decode_number(payload)

    run = run_batch(
        [1, rejected, 3], lambda payloads: decode_each(payloads, decode), lambda items: items, str
    )
    assert seen == [1, 3]
    assert run.responses == ["1", rejected, "3"] and run.rejected_inputs == 1


def test_scatter_checks_lengths() -> None:
    decoded = [1, InvalidInput.error("bad"), 3]
    subset = valid_subset(decoded)
    assert subset.indices == [0, 2]
    with pytest.raises(BatchLengthError):
        scatter(decoded, subset, ["only one"])
    with pytest.raises(BatchLengthError):
        check_length([1, 2], 3, "stage")


def test_each_stage_is_timed() -> None:
    run = run_batch([1, 2], decode_numbers, lambda items: items, str)
    assert run.responses == ["1", "2"]
    assert min(run.decode_ms, run.infer_ms, run.encode_ms) >= 0


@pytest.mark.parametrize(
    ("lengths", "budget", "max_items"),
    [
        ([5, 50, 7, 48, 6, 49], 150, None),
        ([10] * 9, 40, None),
        ([100, 1, 1, 1], 64, None),
        ([3, 9, 27, 81, 2, 5], 100, 2),
        ([], 10, None),
    ],
)
def test_sub_batches_cover_every_item_once_and_respect_the_budget(lengths, budget, max_items) -> None:
    groups = plan_sub_batches(lengths, budget, max_items)
    flat = sorted(i for group in groups for i in group)
    assert flat == list(range(len(lengths)))
    for group in groups:
        padded = len(group) * max(lengths[i] for i in group)
        assert padded <= budget or len(group) == 1
        if max_items:
            assert len(group) <= max_items


def test_sub_batches_group_similar_lengths() -> None:
    groups = plan_sub_batches([5, 50, 7, 48, 6, 49], token_budget=150)
    assert groups == [[1, 5, 3], [2, 4, 0]]
