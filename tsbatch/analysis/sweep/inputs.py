"""What the sweep feeds a model: scenarios of real inputs, prepared as the handlers prepare
them. Each kind makes its own (``image_scenario``, ``text_scenarios`` in its sweep module)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

POOL_SIZE = 256  # distinct samples per scenario; larger batches cycle through them
ROTATIONS = 8  # distinct batches per point, timed in turn (the length mix of text varies)

Inputs = tuple[torch.Tensor, ...]


@dataclass
class Scenario:
    """One input distribution: a batch of ``b`` samples from ``offset`` on (cycling through
    the pool), or sample ``i`` alone."""

    name: str
    batch: Callable[[int, int], Inputs]
    single: Callable[[int], Inputs]


def cycle(items: Sequence[Any], count: int, offset: int = 0) -> list[Any]:
    return [items[(offset + i) % len(items)] for i in range(count)]
