"""What the tuner tries and in which order: the search space and the pruned search.

Batch 1 per worker count first, then per (workers, delay) lane growing batch sizes until
the rules of :mod:`tsbatch.analysis.selection` say stop. The measuring is a callback, so
the order and the pruning are unit-tested on a simulated server.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tsbatch.analysis.selection import (
    DECODE_THREADS,
    TunePoint,
    allowed_delays,
    longer_delay_pointless,
    reachable_batch_sizes,
    select_configuration,
    stop_growing_batch,
)
from tsbatch.client.load import LoadSpec
from tsbatch.settings.batch import BatchSettings
from tsbatch.sla.profiles import Sla


@dataclass(frozen=True)
class SearchSpace:
    batch_sizes: list[int]
    delays_ms: list[int]
    workers: list[int]
    min_gain: float = 0.05
    # Decode pools tried at the best (batch, delay, workers) found at the packaged pool: sizes
    # or auto; empty: the model's kind has none, or the user left it out. Sizes are capped at
    # ``cores`` per worker in all; auto counts as 1, as in check-config.
    decode_threads: list[int | str] = field(default_factory=list)
    cores: int = 1


FULL_SPACE = SearchSpace(batch_sizes=[1, 2, 4, 8, 16, 32], delays_ms=[5, 20], workers=[1, 2])
QUICK_SPACE = SearchSpace(batch_sizes=[1, 4, 8], delays_ms=[10], workers=[1])
FULL_LOAD = LoadSpec(concurrency=8, warmup_s=2.0, measure_s=8.0)  # 8 users, as `make loadtest`
QUICK_LOAD = LoadSpec(concurrency=8, warmup_s=1.0, measure_s=3.0)


@dataclass
class SearchLog:
    points: list[TunePoint] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)


def search(
    model: str,
    sla: Sla,
    space: SearchSpace,
    load: LoadSpec,
    run_point: Callable[[BatchSettings], TunePoint],
    log: Callable[[str], None] = print,
) -> SearchLog:
    """Batch 1 per worker count, then per (workers, delay) lane growing batch sizes until
    the pruning rules say stop. Points are measured once and shared between lanes."""
    result = SearchLog()
    delays, dropped_delays = allowed_delays(space.delays_ms, sla)
    if dropped_delays:
        result.pruned.append(
            f"delays {dropped_delays} ms never tried: over half the p99 ceiling ({sla.p99_ms:g} ms)"
        )
    if not delays:
        delays = [0]
    sizes, dropped_sizes = reachable_batch_sizes(
        space.batch_sizes, None if load.rate_rps else load.concurrency
    )
    if dropped_sizes:
        result.pruned.append(
            f"batch sizes {dropped_sizes} never tried: above the concurrency ({load.concurrency})"
        )
    measured: dict[tuple[int, int, int], TunePoint] = {}

    def run(batch_size: int, delay: int, workers: int) -> TunePoint:
        key = (batch_size, delay, workers)
        if key not in measured:
            measured[key] = run_point(BatchSettings.for_point(batch_size, delay, workers))
            result.points.append(measured[key])
        return measured[key]

    for workers in space.workers:
        base = run(1, delays[0], workers) if 1 in sizes else None  # at batch 1 the delay never applies
        for delay in delays:
            lane = [base] if base is not None else []
            for batch_size in (b for b in sizes if b > 1):
                shorter = [
                    measured[(batch_size, d, workers)]
                    for d in delays
                    if d < delay and (batch_size, d, workers) in measured
                ]
                pointless = next((why for p in shorter if (why := longer_delay_pointless(p))), None)
                if pointless:  # the same batches would form: the shorter delay's point stands in
                    result.pruned.append(f"{model} b{batch_size} d{delay} w{workers} skipped: {pointless}")
                    log(f"[tune] skip b{batch_size} d{delay} w{workers}: {pointless}")
                    lane.append(shorter[-1])
                else:
                    lane.append(run(batch_size, delay, workers))
                why = stop_growing_batch(lane, sla, space.min_gain)
                if why:
                    rest = [b for b in sizes if b > batch_size]
                    if rest:
                        result.pruned.append(
                            f"{model} w{workers} d{delay}: batch sizes {rest} skipped: {why}"
                        )
                        log(f"[tune] pruned {rest} for w{workers} d{delay}: {why}")
                    break
    search_layout(model, sla, space, run_point, result, log)
    return result


def pool_cores(threads: int | str) -> int:
    """The cores a decode pool counts for: its size; auto, 1 (its threads run only while big
    pictures decode, and wait without spinning)."""
    return threads if isinstance(threads, int) else 1


def pools_text(pools: list[int | str]) -> str:
    return "[" + ", ".join(str(pool) for pool in pools) + "]"


def search_layout(
    model: str,
    sla: Sla,
    space: SearchSpace,
    run_point: Callable[[BatchSettings], TunePoint],
    result: SearchLog,
    log: Callable[[str], None],
) -> None:
    """The decode pool: the best point so far (the SLA's winner, else the most throughput)
    again with each pool size that, over its workers, fits the cores. Large photos are
    decode-bound, and PIL decodes without the GIL: a pool lets one worker use every core;
    auto decodes small pictures inline and big ones side by side (``image_serving.pool``)."""
    measured = [p for p in result.points if not p.failure]
    if not space.decode_threads or not measured:
        return
    best = select_configuration(measured, sla).winner or max(measured, key=lambda p: p.throughput_rps)
    workers = best.settings.workers or 1
    fitting = [t for t in space.decode_threads if workers * pool_cores(t) <= max(space.cores, workers)]
    skipped = [t for t in space.decode_threads if t not in fitting]
    if skipped:
        result.pruned.append(
            f"{model} decodeThreads {skipped} skipped: {workers} worker(s) x that is over {space.cores} cores"
        )
    log(f"[tune] {model}: decode pools {pools_text(fitting)} at {best.short_label}")
    for threads in (t for t in fitting if t != best.decode_threads):  # that one is measured
        batch_size, delay, _ = best.settings.key
        point = run_point(BatchSettings.for_point(batch_size, delay, workers, **{DECODE_THREADS: threads}))
        result.points.append(point)
