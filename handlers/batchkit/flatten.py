"""Several inputs per request, one model batch: flatten the inputs of every request of a
TorchServe batch into one list, and regroup the per-input results by request, in order.

The model runs once on everything valid in the batch, however the inputs were packed into
requests; these two pure functions are the bookkeeping around that one run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from batchkit.errors import RequestError

Input = TypeVar("Input")
Result = TypeVar("Result")


@dataclass(frozen=True)
class FlatBatch(Generic[Input]):
    """Every input of the batch, and per request its slice of them (or its own error, for a
    request whose envelope was rejected before any of its inputs could be read)."""

    inputs: list[Input]
    spans: list[range | RequestError]


def flatten(per_request: Sequence[Sequence[Input] | RequestError]) -> FlatBatch[Input]:
    """Concatenate the inputs of each request; a rejected request contributes none."""
    inputs: list[Input] = []
    spans: list[range | RequestError] = []
    for request in per_request:
        if isinstance(request, RequestError):
            spans.append(request)
            continue
        start = len(inputs)
        inputs.extend(request)
        spans.append(range(start, len(inputs)))
    return FlatBatch(inputs=inputs, spans=spans)


def regroup(
    results: Sequence[Result], spans: Sequence[range | RequestError]
) -> list[list[Result] | RequestError]:
    """Give each request the results of its own inputs, in the order it sent them."""
    covered = sum(len(span) for span in spans if isinstance(span, range))
    if covered != len(results):
        raise ValueError(f"{len(results)} results for {covered} flattened inputs")
    return [span if isinstance(span, RequestError) else [results[i] for i in span] for span in spans]
