"""Each diagnosis rule fires on the figures it names, and says so when none holds."""

from __future__ import annotations

from tsbatch.settings.batch import BatchSettings
from tsbatch.sla.diagnosis import diagnose
from tsbatch.sla.server import ServerFigures

SETTINGS = BatchSettings(batch_size=8, max_batch_delay_ms=10, min_workers=1, max_workers=1)


def figures(
    mean_batch: float = 4.0, queue: float = 5.0, inference: float = 10.0, **extra: object
) -> ServerFigures:
    values: dict = {
        "model": "m",
        "start": 0.0,
        "end": 10.0,
        "batches": 100,
        "requests": int(100 * mean_batch),
        "mean_batch_size": mean_batch,
        "queue_ms": queue,
        "server_ms": queue + inference + 2,
        "preprocess_ms": 1.0,
        "inference_ms": inference,
        "postprocess_ms": 1.0,
        "padding_efficiency": None,
        "settings": SETTINGS,
        "worker_restarts": 0,
    }
    return ServerFigures(**{**values, **extra})


def test_a_long_queue_with_full_batches_asks_for_workers() -> None:
    lines = diagnose([("p99_ms", 100.0)], 50.0, figures(mean_batch=7.6, queue=70.0))
    assert lines == [
        "queue time is 70% of p99 (70 of 100 ms) with batches 95% full: the workers are saturated: add workers"
    ]


def test_a_queue_made_of_the_batch_delay_asks_for_a_smaller_delay() -> None:
    lines = diagnose([("p95_ms", 16.0)], 15.0, figures(mean_batch=4.0, queue=12.0, inference=2.0))
    assert lines[0].startswith(
        "queue time is 75% of p95 (12 of 16 ms), mostly the maxBatchDelay wait (10 ms)"
    )


def test_a_long_queue_with_half_empty_batches_waits_for_a_busy_worker() -> None:
    lines = diagnose([("p99_ms", 100.0)], 60.0, figures(mean_batch=4.0, queue=60.0))
    assert "requests wait for a busy worker: more workers (now 1) or a smaller maxBatchDelay" in lines[0]


def test_handler_time_names_its_slowest_stage() -> None:
    lines = diagnose([("p99_ms", 100.0)], 80.0, figures(inference=70.0))
    assert lines == [
        "handler time is 72% of p99 (72 of 100 ms a batch, inference 70 ms): a faster inference or a smaller batchSize"
    ]
    small = diagnose([("p99_ms", 100.0)], 80.0, figures(mean_batch=1.9, inference=70.0))
    assert small[0].endswith(
        "with batches of 1.9 of 8: the model is slow even on small batches: "
        "a faster inference or more compute per worker"
    )


def test_small_batches_restarts_and_padding_are_each_named() -> None:
    lines = diagnose(
        [("p99_ms", 40.0)], 20.0, figures(mean_batch=1.3, worker_restarts=2, padding_efficiency=0.4)
    )
    assert lines[0].startswith("2 worker restart(s) in the window")
    assert "batches average 1.3 of 8: load too low for this maxBatchDelay (10 ms)" in lines[1]
    assert lines[2].startswith("text batches are 40% real tokens")


def test_time_outside_the_server_and_no_cause_are_said_plainly() -> None:
    outside = diagnose([("p99_ms", 400.0)], 200.0, figures(queue=5.0, inference=10.0))
    assert outside[0].startswith("TorchServe's own time (17 ms a request) is under half of p50 (200 ms)")
    unknown = diagnose([("p99_ms", 40.0)], 20.0, figures(queue=8.0, inference=10.0))
    assert unknown[0].startswith("no single cause: queue 8 ms and handler 12 ms on average against p99 40 ms")
    # small batches are no cause when the delay they wait for is a sliver of the latency
    assert not any(
        "batches average" in line for line in diagnose([("p99_ms", 400.0)], 30.0, figures(mean_batch=1.3))
    )
    assert diagnose([("p99_ms", 40.0)], 20.0, None)[0].startswith("no server figures")


def test_the_lowest_breached_percentile_the_means_explain_is_named() -> None:
    # handler 72 ms is most of p50 (100 ms) though a sliver of p99 (900 ms)
    lines = diagnose([("p50_ms", 100.0), ("p99_ms", 900.0)], 100.0, figures(inference=70.0))
    assert lines[0].startswith("handler time is 72% of p50")
