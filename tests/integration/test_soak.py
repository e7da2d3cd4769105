"""A CI-sized soak: 75 s of mixed traffic on both models, sampling every worker's RSS.

A leak in the handlers (tensors kept across batches, growing caches, tokenizer state)
shows as RSS that keeps climbing after warm-up; allocator caches make the first seconds
grow, so growth is measured only after the warm-up, between the medians of the first and
last few samples, and the slope is printed per minute. Measured here: the intent worker
grows ~22 MB over its first ~3000 requests (caches for new batch/sequence shapes), then
stays flat (+1.7 MB over the next 11 000); the ResNet worker is flat after seconds. So the
warm-up lasts until the intent model has served WARMUP_REQUESTS (at most WARMUP_MAX_S).
"""

from __future__ import annotations

import statistics
import time
from contextlib import ExitStack

import numpy as np
import psutil
import pytest

from tests.integration.support import background_load, record
from tsbatch.archive.manifest import load_manifest
from tsbatch.client.load import BackgroundLoad
from tsbatch.kinds.image.workload import image_pool
from tsbatch.kinds.text.utterances import read_utterances
from tsbatch.kinds.text.workload import text_pool
from tsbatch.workloads.payloads import Payload

pytestmark = pytest.mark.slow

WARMUP_REQUESTS = 3000
WARMUP_MAX_S = 45
MEASURE_S = 36
SAMPLE_EVERY_S = 2
MAX_GROWTH_MB = 12
CLIENTS_PER_MODEL = 3


def pool_load(server, model: str, pool: list[Payload]) -> BackgroundLoad:
    """The load-test pools: images of many sizes and formats; utterances, some past max_length."""
    bodies, types = [p.body for p in pool], [p.content_type for p in pool]
    return background_load(server, model, bodies, CLIENTS_PER_MODEL, content_type=types)


def worker_processes(server, model: str) -> list[psutil.Process]:
    return [psutil.Process(worker["pid"]) for worker in server.client.describe(model)["workers"]]


def median_mb(values: list[float]) -> float:
    return statistics.median(values) / 2**20


def test_worker_memory_does_not_grow_under_steady_mixed_load(torchserve) -> None:
    """On the session's shared instance (every model, config.properties' settings): what
    earlier tests left in its workers only shortens the warm-up."""
    models = list(load_manifest().models)
    assert set(models) == {"resnet18", "bert_intent"}, "update the payload pools for new models"
    server = torchserve
    workers = {model: worker_processes(server, model) for model in models}
    samples: dict[int, list[tuple[float, int]]] = {p.pid: [] for ps in workers.values() for p in ps}
    process_start_rss = {p.pid: p.memory_info().rss for ps in workers.values() for p in ps}

    loads = [
        pool_load(server, "resnet18", image_pool(seed=7)),
        pool_load(server, "bert_intent", text_pool(read_utterances(), seed=7)),
    ]
    started = time.monotonic()
    with ExitStack() as running:
        for load in loads:
            running.enter_context(load)
        while len(loads[1].records) < WARMUP_REQUESTS and time.monotonic() - started < WARMUP_MAX_S:
            time.sleep(0.5)
        warmup_s, warmup_requests = time.monotonic() - started, sum(len(load.records) for load in loads)
        while time.monotonic() - started < warmup_s + MEASURE_S:
            now = time.monotonic() - started
            for process in (p for ps in workers.values() for p in ps):
                samples[process.pid].append((now, process.memory_info().rss))
            time.sleep(SAMPLE_EVERY_S)

    outcomes = [o for load in loads for o in load.records]
    figures: dict[str, dict[str, float]] = {}
    assert {o.status for o in outcomes} == {200}, "every soak request must succeed"
    for model, processes in workers.items():
        for process in processes:
            assert process.is_running(), f"{model} worker {process.pid} died during the soak"
            measured = samples[process.pid]
            first, last = [rss for _, rss in measured[:3]], [rss for _, rss in measured[-3:]]
            growth = median_mb(last) - median_mb(first)
            times = np.array([t for t, _ in measured])
            slope = np.polyfit(times, np.array([rss for _, rss in measured]) / 2**20, 1)[0] * 60
            start_mb = process_start_rss[process.pid] / 2**20
            print(
                f"\n[soak] {model} worker {process.pid}: RSS {start_mb:.0f} MB at start, {median_mb(first):.1f} MB "
                f"after the warm-up ({warmup_s:.0f} s), {median_mb(last):.1f} MB {MEASURE_S} s later "
                f"(growth {growth:+.1f} MB, slope {slope:+.2f} MB/min)"
            )
            figures[f"{model}:{process.pid}"] = {
                "rss_mb_start": round(start_mb, 1),
                "rss_mb_after_warmup": round(median_mb(first), 1),
                "rss_mb_end": round(median_mb(last), 1),
                "growth_mb": round(growth, 2),
                "slope_mb_per_min": round(float(slope), 3),
            }
            assert growth < MAX_GROWTH_MB, (
                f"{model} worker grew {growth:.1f} MB in {MEASURE_S} s after warm-up"
            )
    per_model = {load.driver.model: len(load.records) for load in loads}
    print(
        f"[soak] {len(outcomes)} requests in {warmup_s + MEASURE_S:.0f} s ({warmup_requests} in the warm-up): {per_model}"
    )
    record(
        "soak",
        seconds=round(warmup_s + MEASURE_S),
        warmup_s=round(warmup_s),
        warmup_requests=warmup_requests,
        requests=per_model,
        workers=figures,
    )
