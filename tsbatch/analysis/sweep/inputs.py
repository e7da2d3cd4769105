"""What the sweep feeds a model: scenarios of real inputs, prepared as the handlers prepare them.

ResNet images go through the handler's own preprocessing at the archive's input size; the
intent model sees our utterances, padded to the longest of each batch as the handler pads,
and a fixed long length.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tsbatch.workloads.images import handwritten_digits
from tsbatch.workloads.utterances import read_utterances

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


def image_scenario(handler: dict[str, Any], pool_size: int = POOL_SIZE) -> Scenario:
    """Digit images preprocessed exactly as the handler does, at the archive's crop size."""
    from batchkit.images import preprocess

    resize, crop = int(handler["resize_size"]), int(handler["crop_size"])
    tensors = [
        preprocess(image, resize, crop, handler["mean"], handler["std"])
        for image in handwritten_digits(pool_size, size=max(64, resize))
    ]
    return Scenario(
        name=f"{crop}x{crop}",
        batch=lambda b, offset=0: (torch.stack(cycle(tensors, b, offset)),),
        single=lambda i: (tensors[i % len(tensors)].unsqueeze(0),),
    )


def text_scenarios(tokenizer_dir: Path, max_length: int, pool_size: int = POOL_SIZE) -> list[Scenario]:
    """Our utterances padded to the longest of each batch, and all samples at ``max_length``."""
    from batchkit.text import load_tokenizer, pad_id, pad_to_longest, tokenize

    tokenizer = load_tokenizer(tokenizer_dir, max_length)
    padding = pad_id(tokenizer)
    texts = read_utterances(shuffle_seed=0)
    ids = tokenize(tokenizer, texts[:pool_size]).ids
    # Long inputs: several utterances joined and truncated, so every sample is max_length real tokens.
    joined = [" ".join(cycle(texts[i:] + texts[:i], 12)) for i in range(pool_size)]
    long_ids = tokenize(tokenizer, joined).ids

    def scenario(name: str, pool: list[list[int]]) -> Scenario:
        return Scenario(
            name=name,
            batch=lambda b, offset=0: pad_to_longest(cycle(pool, b, offset), padding),
            single=lambda i: pad_to_longest([pool[i % len(pool)]], padding),
        )

    lengths = sorted(len(row) for row in ids)
    return [
        scenario(f"utterances (median {lengths[len(lengths) // 2]} tok)", ids),
        scenario(f"fixed {max(len(row) for row in long_ids)} tok", long_ids),
    ]
