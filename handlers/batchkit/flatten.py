"""Several inputs per request, one model batch: flatten the inputs of every request of a
TorchServe batch into one list, and regroup the per-input results by request, in order.

The model runs once on everything valid in the batch, however the inputs were packed into
requests; these two pure functions are the bookkeeping around that one run. A request
rejected before any input was read simply has none: its error travels on its parsed
request, not here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

Input = TypeVar("Input")
Result = TypeVar("Result")


@dataclass(frozen=True)
class FlatBatch(Generic[Input]):
    """Every input of the batch, and per request its slice of them."""

    inputs: list[Input]
    spans: list[range]


def flatten(per_request: Sequence[Sequence[Input]]) -> FlatBatch[Input]:
    """Concatenate the inputs of each request."""
    inputs: list[Input] = []
    spans: list[range] = []
    for request in per_request:
        start = len(inputs)
        inputs.extend(request)
        spans.append(range(start, len(inputs)))
    return FlatBatch(inputs=inputs, spans=spans)


def regroup(results: Sequence[Result], spans: Sequence[range]) -> list[list[Result]]:
    """Give each request the results of its own inputs, in the order it sent them."""
    covered = sum(len(span) for span in spans)
    if covered != len(results):
        raise ValueError(f"{len(results)} results for {covered} flattened inputs")
    return [[results[i] for i in span] for span in spans]
