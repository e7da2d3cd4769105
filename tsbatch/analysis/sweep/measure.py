"""Measuring one point: timed runs after warm-up, peak memory, and output drift against
each sample run alone at batch 1."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psutil
import torch

from tsbatch.analysis.sweep.inputs import Inputs, Scenario

Forward = Callable[[Inputs], torch.Tensor]


def is_out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError | MemoryError) or "out of memory" in str(exc).lower()


def drift(reference: torch.Tensor, output: torch.Tensor) -> tuple[float, float, float]:
    """(max |diff|, lowest per-sample cosine similarity, share of equal top-1) of two [n, k] outputs."""
    reference, output = reference.float().reshape(len(reference), -1), output.float().reshape(len(output), -1)
    max_abs = float((reference - output).abs().max())
    cosine = float(torch.nn.functional.cosine_similarity(reference, output, dim=1).min())
    top1 = float((reference.argmax(dim=1) == output.argmax(dim=1)).float().mean())
    return max_abs, cosine, top1


class MemoryProbe:
    """Peak memory of one measurement: CUDA max allocated, or the process RSS on the CPU."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.process = psutil.Process()
        self.peak = 0

    @property
    def kind(self) -> str:
        return "cuda_max_allocated" if self.device.type == "cuda" else "process_rss"

    def reset(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        self.peak = 0

    def sample(self) -> None:
        if self.device.type == "cuda":
            self.peak = max(self.peak, torch.cuda.max_memory_allocated(self.device))
        else:
            self.peak = max(self.peak, self.process.memory_info().rss)

    @property
    def peak_mb(self) -> float:
        return self.peak / 2**20


@dataclass(frozen=True)
class Budget:
    """How long to time one point: up to ``iters`` timed runs (at least ``min_iters``)
    after up to ``warmup`` runs, both cut short after ``max_seconds``."""

    iters: int = 20
    warmup: int = 3
    min_iters: int = 3
    max_seconds: float = 5.0


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def to_device(inputs: Inputs, device: torch.device) -> Inputs:
    return tuple(t.to(device) for t in inputs)


def time_batch(
    forward: Forward,
    batches: Sequence[Inputs],
    device: torch.device,
    budget: Budget,
    memory: MemoryProbe,
) -> tuple[list[float], torch.Tensor]:
    """Latencies (ms) of timed runs after warm-up, taking the batches in turn, and the
    output of the first batch (the one drift is measured on)."""
    started = time.perf_counter()
    first_output = forward(batches[0])
    synchronize(device)
    for index in range(1, budget.warmup):
        if time.perf_counter() - started > budget.max_seconds / 2:
            break
        forward(batches[index % len(batches)])
        synchronize(device)
    memory.reset()
    latencies: list[float] = []
    started = time.perf_counter()
    while len(latencies) < budget.iters:
        if len(latencies) >= budget.min_iters and time.perf_counter() - started > budget.max_seconds:
            break
        begin = time.perf_counter()
        forward(batches[len(latencies) % len(batches)])
        synchronize(device)
        latencies.append(1000 * (time.perf_counter() - begin))
        memory.sample()
    return latencies, first_output


class References:
    """Each sample's output when run alone at batch 1 (computed once, on demand)."""

    def __init__(self, scenario: Scenario, forward: Forward, device: torch.device) -> None:
        self.scenario, self.forward, self.device = scenario, forward, device
        self.outputs: dict[int, torch.Tensor] = {}

    def first(self, count: int) -> torch.Tensor:
        for i in range(count):
            if i not in self.outputs:
                self.outputs[i] = self.forward(to_device(self.scenario.single(i), self.device)).float().cpu()
        return torch.cat([self.outputs[i] for i in range(count)])
