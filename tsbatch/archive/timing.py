"""How the build times its candidates: the one timing rule behind ``auto`` (the planner
serves the fastest gated candidate the build timed on a CPU of the same model)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import torch

from batchkit.config import BuildTimings
from batchkit.precision import cpu_identity

# Threads the timing runs on: what one worker gets by default (config.properties).
TIMING_THREADS = 1


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


def time_candidates(
    candidates: Mapping[str, Callable[..., torch.Tensor]], batch: tuple[torch.Tensor, ...]
) -> BuildTimings:
    """Each candidate's best time per ``batch`` on ``TIMING_THREADS``, as workers run them,
    recorded with this CPU's identity (model name and features: timings say nothing about another CPU)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(TIMING_THREADS)
    try:
        ms = {name: round(batch_ms(forward, batch), 3) for name, forward in candidates.items()}
    finally:
        torch.set_num_threads(threads)
    return BuildTimings(cpu_model=cpu_identity(), batch_size=len(batch[0]), ms=ms)
