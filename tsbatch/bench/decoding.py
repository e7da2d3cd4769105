"""Decode rows of ``make bench``: how fast a worker turns request bodies into crops, per
decode path (PIL or the tensor path, ``image_serving.decode``) and decode pool size, beside the
model's own rate, so the table says whether the worker is decode-bound.

Each row is measured in-process on the benchmark's own payloads, the worker's code with
nothing around it: images decoded per second, and per core (a pool of two threads on a
two-core machine uses both cores).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import torch

from image_serving.config import ImageModelConfig
from image_serving.decode import DecodePool, ImageDecoder
from image_serving.pool import AUTO

# (path, threads) measured on every run; the served table repeats the non-default ones.
SETTINGS = (("pil", 1), ("pil", 2), ("tensor", 1), ("tensor", 2))
CPU = torch.device("cpu")


@dataclass(frozen=True)
class DecodeRow:
    path: str
    threads: int
    images_per_s: float

    @property
    def per_core(self) -> float:
        return self.images_per_s / min(self.threads, os.cpu_count() or 1)

    @property
    def label(self) -> str:
        return f"{self.path} x{self.threads}"


def decode_rate(
    config: ImageModelConfig,
    payloads: list[bytes],
    path: str,
    threads: int,
    batch_size: int,
    seconds: float,
    device: torch.device = CPU,
) -> float:
    """Images per second one worker decodes, batch after batch, on ``path`` with ``threads``
    (the tensor path decodes on ``device``)."""
    decoder = ImageDecoder(config, device, path, DecodePool(threads))
    decoder.decode_batch(payloads[:batch_size])  # first-call costs out of the figure
    count, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        start = count % len(payloads)
        batch = (payloads * 2)[start : start + batch_size]
        results = decoder.decode_batch(batch)
        if not all(isinstance(result, torch.Tensor) for result in results):
            raise RuntimeError(f"{path} x{threads} failed to decode a benchmark payload: {results}")
        count += len(batch)
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # the device's kernels are asynchronous
    return count / (time.perf_counter() - started)


def decode_rows(
    config: ImageModelConfig, payloads: list[bytes], batch_size: int, seconds: float
) -> list[DecodeRow]:
    return [
        DecodeRow(path, threads, decode_rate(config, payloads, path, threads, batch_size, seconds))
        for path, threads in SETTINGS
    ]


def auto_threads(config: ImageModelConfig, payloads: list[bytes], batch_size: int) -> int:
    """The threads ``decodeThreads: auto`` gives a batch of these payloads on this machine."""
    return ImageDecoder(config, CPU, "pil", DecodePool(AUTO)).threads_for(payloads[:batch_size])


def configured_row(rows: list[DecodeRow], threads: int, path: str) -> DecodeRow:
    """The row a worker with these settings decodes at: ``auto`` on a CPU takes the faster path."""
    matching = [row for row in rows if row.threads == threads and path in ("auto", row.path)]
    if not matching:
        raise ValueError(f"decode {path} x{threads} was not measured (rows: {[r.label for r in rows]})")
    return max(matching, key=lambda row: row.images_per_s)


def bound_line(shape: str, configured: DecodeRow, model_ips: float, model_label: str) -> str:
    """Whether the worker is decode-bound: its decode rate below the model's rate."""
    verdict = "decode-bound" if configured.images_per_s < model_ips else "model-bound"
    return (
        f"{shape}: {verdict}: decode {configured.images_per_s:.1f} img/s ({configured.label}, as configured) "
        f"vs the model {model_ips:.1f} img/s ({model_label})"
    )


def print_decode_rows(shape: str, rows: list[DecodeRow]) -> None:
    baseline = rows[0].images_per_s
    print(f"{'shape':<10}{'decode':<12}{'img/s':>9}{'per core':>10}{'vs pil x1':>11}")
    for row in rows:
        print(
            f"{shape:<10}{row.label:<12}{row.images_per_s:>9.1f}{row.per_core:>10.1f}"
            f"{row.images_per_s / baseline:>10.2f}x"
        )


def print_section(
    section: dict[str, Any], model_row: dict[str, Any] | None, settings: dict[str, Any]
) -> None:
    """One shape's decode rows, its served rows and whether the worker is decode-bound
    (``model_row``: the default variant's row of the main table)."""
    shape = section["shape"]
    print_decode_rows(shape, section["rows"])
    baseline = section["served"][0][1]["served_rps"]
    print(
        f"{'shape':<10}{'served decode':<15}{'req/s':>9}{'p50 ms':>8}{'p99 ms':>8}{'errors':>7}{'vs pil x1':>11}"
    )
    for label, row in section["served"]:
        ratio = row["served_rps"] / baseline if baseline else float("nan")
        print(
            f"{shape:<10}{label:<15}{row['served_rps']:>9.1f}{row['p50_ms']:>8.1f}{row['p99_ms']:>8.1f}"
            f"{row['errors']:>7d}{ratio:>10.2f}x"
        )
    if model_row is not None:
        threads = settings.get("decodeThreads", AUTO)
        configured = configured_row(
            section["rows"],
            section["auto"] if threads == AUTO else threads,
            settings.get("decodePath", "auto"),
        )
        print(bound_line(shape, configured, model_row["model_ips"], model_row["variant"].label))
