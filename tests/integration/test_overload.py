"""Overload past job_queue_size: fast 503s for what does not fit, bounded latency for what
does, and a frontend whose memory stays bounded while far more bytes arrive than it holds.

The frontend's heap is capped (256 MB, exit on OutOfMemoryError) for this instance: were
rejected requests queued instead of refused, the ~0.5 GB of bodies offered would kill it.
"""

from __future__ import annotations

import io
import json
import statistics
import threading
import time

import numpy as np
import psutil
import pytest
from PIL import Image

from tests.integration.support import background_load, record
from tsbatch.client.load import Record
from tsbatch.sla.percentile import percentile

pytestmark = [pytest.mark.slow, pytest.mark.serial]  # timed under load: run alone

MODEL = "resnet18"
QUEUE = 4
CLIENTS = 32
SECONDS = 8
HEAP = "256m"


def noise_png(size: int, seed: int) -> bytes:
    """A photo-like (incompressible) PNG: large bodies, like real uploads."""
    pixels = np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def frontend(server) -> psutil.Process:
    launcher = psutil.Process(server.process.pid)
    return next(p for p in launcher.children(recursive=True) if p.name() == "java")


def latencies_ms(records: list[Record]) -> list[float]:
    return [r.response_time_ms for r in records if r.response_time_ms is not None]


def test_overload_gets_fast_503s_and_memory_stays_bounded(start_server, model_store) -> None:
    server = start_server(
        model_store,
        [MODEL],
        overrides={
            "job_queue_size": str(QUEUE),
            "vmargs": f"-Xmx{HEAP} -XX:+UseG1GC -XX:+ExitOnOutOfMemoryError",
        },
    )
    timeout_s = server.client.describe(MODEL)["responseTimeout"]
    bodies = [noise_png(256, seed) for seed in range(4)]
    java = frontend(server)
    assert server.client.predict(MODEL, bodies[0], "image/png").status_code == 200
    rss_before = java.memory_info().rss

    pending: list[int] = []
    stop = threading.Event()

    def watch_queue() -> None:
        while not stop.is_set():
            pending.append(server.client.describe(MODEL)["jobQueueStatus"]["pendingRequests"])
            time.sleep(0.2)

    watcher = threading.Thread(target=watch_queue, daemon=True)
    watcher.start()
    try:
        with background_load(server, MODEL, bodies, clients=CLIENTS) as load:
            time.sleep(SECONDS)
    finally:
        stop.set()
        watcher.join(timeout=10)
    rss_after = java.memory_info().rss

    outcomes = load.records
    accepted = latencies_ms([o for o in outcomes if o.status == 200])
    rejected = [o for o in outcomes if o.status == 503]
    rejected_ms = latencies_ms(rejected)
    offered_mb = sum(len(bodies[i % len(bodies)]) for i in range(len(outcomes))) / 2**20
    print(
        f"\n[overload] {CLIENTS} clients for {SECONDS} s, job_queue_size {QUEUE}: {len(outcomes)} requests, "
        f"{len(accepted)} accepted, {len(rejected)} got 503\n"
        f"[overload] 503 latency ms p50 {statistics.median(rejected_ms):.1f} p99 {percentile(rejected_ms, 99):.1f} "
        f"max {max(rejected_ms):.1f}; accepted ms p50 {statistics.median(accepted):.1f} "
        f"p99 {percentile(accepted, 99):.1f} max {max(accepted):.1f}\n"
        f"[overload] frontend RSS {rss_before / 2**20:.0f} MB -> {rss_after / 2**20:.0f} MB (heap cap {HEAP}) "
        f"while {offered_mb:.0f} MB of bodies were offered; most requests queued: {max(pending)}"
    )
    record(
        "overload",
        clients=CLIENTS,
        seconds=SECONDS,
        job_queue_size=QUEUE,
        requests=len(outcomes),
        accepted=len(accepted),
        rejected_503=len(rejected),
        rejected_ms_p50=round(statistics.median(rejected_ms), 1),
        rejected_ms_p99=round(percentile(rejected_ms, 99), 1),
        rejected_ms_max=round(max(rejected_ms), 1),
        accepted_ms_p50=round(statistics.median(accepted), 1),
        accepted_ms_p99=round(percentile(accepted, 99), 1),
        accepted_ms_max=round(max(accepted), 1),
        frontend_rss_mb_before=round(rss_before / 2**20),
        frontend_rss_mb_after=round(rss_after / 2**20),
        offered_mb=round(offered_mb),
        most_queued=max(pending),
    )
    assert {o.status for o in outcomes} <= {200, 503}, "no timeouts, no other errors"
    assert accepted and rejected, "the load must overflow the queue and still be served"
    assert json.loads(rejected[0].body)["code"] == 503
    assert max(pending) <= QUEUE, "the queue grew past job_queue_size"
    assert max(rejected_ms) < 5_000, "a 503 must come at once, not after a wait"
    assert statistics.median(rejected_ms) < statistics.median(accepted)
    assert max(accepted) < 1000 * timeout_s, "accepted requests must finish within responseTimeout"
    assert java.is_running() and frontend(server).pid == java.pid, "the frontend must survive the overload"
    assert rss_after < 1024 * 2**20, "frontend memory not bounded"
    assert offered_mb > 2 * rss_after / 2**20, "the test must offer far more bytes than the frontend holds"
    assert server.client.predict(MODEL, bodies[1], "image/png").status_code == 200
