"""How the build times a candidate: the one timing rule behind ``auto``'s runtime choice
and the int8 speed-up."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


def batch_ms(forward: Callable[..., torch.Tensor], batch: tuple[torch.Tensor, ...], runs: int = 5) -> float:
    """Best time of ``runs`` calls after two warm-up calls (TorchScript profiles on those)."""
    times = []
    with torch.inference_mode():
        for run in range(runs + 2):
            started = time.perf_counter()
            forward(*batch)
            if run >= 2:
                times.append(1000 * (time.perf_counter() - started))
    return min(times)
