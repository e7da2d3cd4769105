"""What a load generator needs to know about one kind of model: what to send it, how to
judge each answer and how a person would call it. Each model kind declares its own
(``tsbatch/kinds/<kind>/workload.py``) in its ``Kind``; ``tsbatch.archive.manifest.workload_for``
finds a model's by its kind in ``models.yaml``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from tsbatch.workloads.payloads import Payload, multi_input_pool

# The problems of one answer (empty when it is right), for one model.
AnswerCheck = Callable[[Any], list[str]]


@dataclass(frozen=True)
class Workload:
    """The request pool, the answer check and the sample call of one kind of model."""

    # The request bodies, built from a seed (realistic sizes, formats and envelopes).
    pool: Callable[[int], list[Payload]]
    # The problems of an answer from the named model (its body must name that model).
    check: Callable[[Any, str], list[str]]
    # Where the ranked answer is: the list's key and each item's label key.
    ranking: tuple[str, str]
    # Shell lines that call a predictions URL (after ``TOKEN=...``), run from the repository root.
    example: Callable[[str], list[str]]
    # Several inputs to a request: our list's key, and one payload as an element of the list.
    list_key: str
    input_value: Callable[[Payload], str]

    def answer_check(self, model: str) -> AnswerCheck:
        """:attr:`check` for the answers of ``model``."""
        return partial(self.check, model=model)

    def multi_input_pool(self, pool: list[Payload], per_request: int) -> list[Payload]:
        """``pool`` packed ``per_request`` inputs to a request, in each envelope in turn."""
        return multi_input_pool(pool, per_request, self.list_key, self.input_value)

    def distribution(self, answer: dict[str, Any]) -> dict[str, float]:
        """The ranked answer as label -> probability, in its order."""
        key, label = self.ranking
        return {str(item[label]): float(item["probability"]) for item in answer[key]}
