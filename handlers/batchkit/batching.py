"""Pure batch functions: decode each request, run the model once on the valid subset,
scatter results back in request order.

TorchServe's frontend owns the queue and the batch timer; by the time a handler sees a
batch the only jobs left are the ones here. None of them knows about TorchServe, so they
are unit-tested without a server.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from batchkit.errors import RequestError, error_for_exception

Payload = TypeVar("Payload")
Item = TypeVar("Item")
Output = TypeVar("Output")


class BatchLengthError(RuntimeError):
    """A stage returned a different number of results than it was given (a handler bug)."""


@dataclass(frozen=True)
class ValidSubset(Generic[Item]):
    """The requests that decoded cleanly, with their positions in the original batch."""

    indices: list[int]
    items: list[Item]


@dataclass(frozen=True)
class BatchRun(Generic[Output]):
    """One batch through the pipeline: a response per request, and what the handler's
    report needs (the model's outputs, the inputs rejected, each stage's time)."""

    responses: list[object | RequestError]
    outputs: list[Output]  # for the valid requests; empty when the model failed
    rejected_inputs: int
    decode_ms: float
    infer_ms: float
    encode_ms: float


def decode_each(
    payloads: Sequence[Payload | RequestError], decode: Callable[[Payload], Item]
) -> list[Item | RequestError]:
    """Decode every request on its own, so that one bad body only fails itself; an input
    already rejected (by its request's envelope) stays rejected."""
    decoded: list[Item | RequestError] = []
    for payload in payloads:
        if isinstance(payload, RequestError):
            decoded.append(payload)
            continue
        try:
            decoded.append(decode(payload))
        except Exception as exc:
            decoded.append(error_for_exception(exc))
    return decoded


def valid_subset(decoded: Sequence[Item | RequestError]) -> ValidSubset[Item]:
    indices: list[int] = []
    items: list[Item] = []
    for index, value in enumerate(decoded):
        if not isinstance(value, RequestError):
            indices.append(index)
            items.append(value)
    return ValidSubset(indices=indices, items=items)


def check_length(results: Sequence[object], expected: int, stage: str) -> None:
    if len(results) != expected:
        raise BatchLengthError(f"{stage} returned {len(results)} results for {expected} inputs")


def run_on_subset(
    subset: ValidSubset[Item], infer: Callable[[list[Item]], Sequence[Output]]
) -> list[Output | RequestError]:
    """Run the model once on the valid items; a failure fails these items, not the server."""
    if not subset.items:
        return []
    try:
        outputs: list[Output | RequestError] = list(infer(subset.items))
        check_length(outputs, len(subset.items), "inference")
    except Exception as exc:
        error = error_for_exception(exc)
        return [error] * len(subset.items)
    return outputs


def scatter(
    decoded: Sequence[Item | RequestError],
    subset: ValidSubset[Item],
    outputs: Sequence[Output | RequestError],
) -> list[Output | RequestError]:
    """Put each output back at its request's position; decode errors stay where they were."""
    check_length(outputs, len(subset.indices), "scatter")
    by_position: dict[int, Output | RequestError] = {
        index: value for index, value in enumerate(decoded) if isinstance(value, RequestError)
    }
    by_position.update(zip(subset.indices, outputs, strict=True))
    return [by_position[index] for index in range(len(decoded))]


def encode_each(
    outputs: Sequence[Output | RequestError], encode: Callable[[Output], object]
) -> list[object | RequestError]:
    """Turn each model output into its response body; one failing encode fails only itself."""
    encoded: list[object | RequestError] = []
    for output in outputs:
        if isinstance(output, RequestError):
            encoded.append(output)
            continue
        try:
            encoded.append(encode(output))
        except Exception as exc:
            encoded.append(error_for_exception(exc))
    return encoded


def run_batch(
    payloads: Sequence[Payload | RequestError],
    decode: Callable[[Sequence[Payload | RequestError]], Sequence[Item | RequestError]],
    infer: Callable[[list[Item]], Sequence[Output]],
    encode: Callable[[Output], object],
) -> BatchRun[Output]:
    """Decode the requests (an item or an error each: ``decode_each``, or a decoder that
    takes the batch at once), run the model once on the valid ones, encode each output;
    one response per request, in order, and each stage timed."""
    started = time.perf_counter()
    decoded = decode(payloads)
    check_length(decoded, len(payloads), "decoding")
    subset = valid_subset(decoded)
    decoded_at = time.perf_counter()
    outputs = run_on_subset(subset, infer)
    inferred_at = time.perf_counter()
    responses = encode_each(scatter(decoded, subset, outputs), encode)
    finished_at = time.perf_counter()
    return BatchRun(
        responses=responses,
        outputs=[output for output in outputs if not isinstance(output, RequestError)],
        rejected_inputs=len(payloads) - len(subset.items),
        decode_ms=1000 * (decoded_at - started),
        infer_ms=1000 * (inferred_at - decoded_at),
        encode_ms=1000 * (finished_at - inferred_at),
    )


def plan_sub_batches(
    lengths: Sequence[int], token_budget: int, max_items: int | None = None
) -> list[list[int]]:
    """Group item indices by length so that each group's padded size stays under a budget.

    Items are sorted by length (longest first, stable), then cut greedily: a group is
    closed when adding the next item would make ``len(group) * longest_in_group`` exceed
    ``token_budget`` (or the group would exceed ``max_items``). A single item longer than
    the budget still gets a group of its own. Returned indices refer to ``lengths``.
    """
    if token_budget <= 0:
        raise ValueError("token_budget must be positive")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    groups: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for index in order:
        length = max(1, lengths[index])
        new_longest = max(longest, length)
        too_many = max_items is not None and len(current) >= max_items
        if current and (new_longest * (len(current) + 1) > token_budget or too_many):
            groups.append(current)
            current, new_longest = [], length
        current.append(index)
        longest = new_longest
    if current:
        groups.append(current)
    return groups
