"""The tuner's search order and pruning, on a simulated server with a known curve."""

from __future__ import annotations

from tsbatch.analysis.selection import TunePoint
from tsbatch.analysis.tune.search import SearchSpace, search
from tsbatch.client.load import LoadSpec
from tsbatch.settings.batch import BatchSettings
from tsbatch.sla.profiles import Sla

SLA = Sla(
    model="m", profile="test", p50_ms=150, p95_ms=400, p99_ms=600, max_error_rate=0.01, min_throughput_rps=10
)


class SimulatedServer:
    """Throughput saturating at batch 8 (per worker), full batches once the delay is >= 5 ms."""

    def __init__(self) -> None:
        self.tried: list[tuple[int, int, int]] = []

    def __call__(self, settings: BatchSettings) -> TunePoint:
        batch, delay, workers = settings.key
        self.tried.append(settings.key)
        curve = {1: 90, 2: 150, 4: 250, 8: 340, 16: 345, 32: 346, 64: 340, 128: 330}
        rps = curve[batch] * (1.2 if workers == 2 else 1.0)
        formed = batch if delay >= 5 else max(1.0, batch / 2)
        return TunePoint(
            "m",
            settings,
            throughput_rps=rps,
            p50_ms=30,
            p95_ms=60,
            p99_ms=90,
            requests=900,
            mean_batch_size=formed,
        )


def test_search_prunes_unreachable_batches_long_delays_full_lanes_and_flat_throughput() -> None:
    server = SimulatedServer()
    space = SearchSpace(batch_sizes=[1, 2, 4, 8, 16, 32, 64, 128], delays_ms=[5, 20, 400], workers=[1, 2])
    outcome = search("m", SLA, space, LoadSpec(concurrency=64), server, log=lambda _: None)
    # 128 > concurrency; 400 ms > half the p99; 20 ms never measured (5 ms already fills);
    # 64 never tried: neither 16 nor 32 added 5% over 8
    assert server.tried == [
        (1, 5, 1), (2, 5, 1), (4, 5, 1), (8, 5, 1), (16, 5, 1), (32, 5, 1),
        (1, 5, 2), (2, 5, 2), (4, 5, 2), (8, 5, 2), (16, 5, 2), (32, 5, 2),
    ]  # fmt: skip
    assert [p.settings.key for p in outcome.points] == server.tried
    text = "\n".join(outcome.pruned)
    assert "delays [400] ms never tried" in text
    assert "batch sizes [128] never tried: above the concurrency (64)" in text
    assert "m b2 d20 w1 skipped: b2 d5 w1 already formed full batches" in text
    assert "m w1 d5: batch sizes [64] skipped: throughput stopped rising" in text


def test_a_longer_delay_is_measured_where_the_shorter_one_leaves_batches_underfilled() -> None:
    server = SimulatedServer()
    space = SearchSpace(batch_sizes=[1, 2, 4], delays_ms=[2, 10], workers=[1])
    search("m", SLA, space, LoadSpec(concurrency=8), server, log=lambda _: None)
    assert server.tried == [(1, 2, 1), (2, 2, 1), (4, 2, 1), (2, 10, 1), (4, 10, 1)]


def test_open_loop_keeps_batch_sizes_above_any_concurrency() -> None:
    server = SimulatedServer()
    space = SearchSpace(batch_sizes=[1, 32], delays_ms=[5], workers=[1])
    search("m", SLA, space, LoadSpec(rate_rps=200), server, log=lambda _: None)
    assert server.tried == [(1, 5, 1), (32, 5, 1)]


def test_decode_pools_are_tried_at_the_best_point_within_the_cores() -> None:
    """Decode-bound photos: a pool of 2 doubles one worker's throughput on 2 cores."""
    tried: list[tuple[int, int, int, int]] = []

    def server(settings: BatchSettings) -> TunePoint:
        (batch, delay, workers), decode_threads = settings.key, settings.worker_key("decodeThreads", 1)
        tried.append((batch, delay, workers, decode_threads))
        rps = 15.0 * workers * decode_threads * (1 + batch / 100)
        return TunePoint(
            "m", settings.with_worker(decodeThreads=decode_threads), rps, 30, 60, 90, requests=900
        )

    space = SearchSpace(batch_sizes=[1, 8], delays_ms=[10], workers=[1], decode_threads=[1, 2, 4], cores=2)
    outcome = search("m", SLA, space, LoadSpec(concurrency=8), server, log=lambda _: None)
    assert tried == [(1, 10, 1, 1), (8, 10, 1, 1), (8, 10, 1, 2)]  # t1 was measured; t4 is over 2 cores
    assert "m decodeThreads [4] skipped: 1 worker(s) x that is over 2 cores" in outcome.pruned
    best = max(outcome.points, key=lambda p: p.throughput_rps)
    assert (best.decode_threads, best.short_label) == (2, "b8 d10 w1 t2")


def test_auto_is_a_decode_pool_the_search_tries_and_can_choose() -> None:
    """Packaged auto: its points come first; 1 and 2 are tried at the best; auto counts as 1
    core per worker, so it fits beside two workers where a pool of 2 does not."""
    tried: list[tuple[int, int, int, int | str]] = []

    def server(settings: BatchSettings) -> TunePoint:
        (batch, delay, workers), decode_threads = settings.key, settings.worker_key("decodeThreads", "auto")
        tried.append((batch, delay, workers, decode_threads))
        rps = {"auto": 40.0, 1: 20.0, 2: 39.0}[decode_threads] * workers
        return TunePoint(
            "m", settings.with_worker(decodeThreads=decode_threads), rps, 30, 60, 90, requests=900
        )

    space = SearchSpace(batch_sizes=[8], delays_ms=[10], workers=[2], decode_threads=["auto", 1, 2], cores=2)
    outcome = search("m", SLA, space, LoadSpec(concurrency=8), server, log=lambda _: None)
    assert tried == [(8, 10, 2, "auto"), (8, 10, 2, 1)]
    assert "m decodeThreads [2] skipped: 2 worker(s) x that is over 2 cores" in outcome.pruned
    best = max(outcome.points, key=lambda p: p.throughput_rps)
    assert (best.decode_threads, best.short_label) == ("auto", "b8 d10 w2 tauto")
