"""Pure decisions behind ``make sweep`` and ``make tune``: no torch, no server, no files.

Knee and latency-budget reading of a batch-size curve, SLA checks of a measured serving
configuration, picking the winner (and saying why every other one lost) and pruning the
search. Kept apart so that each rule is unit-tested on known numbers. (Percentiles are the
load gate's nearest-rank ones, ``tsbatch.sla.percentile``, so the tuner and the gate never
disagree on a p99; TorchServe's counters are read by ``tsbatch.client.metrics``.)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tsbatch.settings.batch import BatchSettings
from tsbatch.sla.profiles import Sla

KNEE_FRACTION = 0.9  # the knee: smallest batch reaching this share of peak throughput
MIN_GAIN = 0.05  # a bigger batch must add 5% throughput over the best smaller one
PATIENCE = 2  # ... and the lane ends after this many bigger batches in a row that did not
TIE_TOLERANCE = 0.02  # throughputs within 2% are a tie, broken by the lower p99
DELAY_SHARE_OF_P99 = 0.5  # the batch delay may use at most half of the p99 ceiling
FULL_BATCH_FILL = 0.95  # mean formed batch / batchSize at which batches count as full
DECODE_THREADS = "decodeThreads"  # the image kind's decode pool: searched where the kind has one


# ---------------------------------------------------------------- sweep curves
def knee_batch_size(
    batch_sizes: Sequence[int], throughputs: Sequence[float], fraction: float = KNEE_FRACTION
) -> int | None:
    """Smallest batch size whose throughput reaches ``fraction`` of the peak.

    Past the knee a bigger batch buys little throughput but still costs latency and
    memory, so it is the natural upper end of the batch sizes worth serving.
    """
    if len(batch_sizes) != len(throughputs):
        raise ValueError("batch_sizes and throughputs differ in length")
    points = sorted(
        (b, t) for b, t in zip(batch_sizes, throughputs, strict=True) if t is not None and math.isfinite(t)
    )
    if not points:
        return None
    peak = max(t for _, t in points)
    return next(b for b, t in points if t >= fraction * peak)


def largest_within_budget(
    batch_sizes: Sequence[int], latencies_ms: Sequence[float], budget_ms: float
) -> int | None:
    """Largest batch size such that it and every smaller one stay within the latency budget.

    The prefix rule keeps one noisy fast reading at a large batch from being picked past
    a smaller batch that already broke the budget. None when batch 1 already breaks it.
    """
    if len(batch_sizes) != len(latencies_ms):
        raise ValueError("batch_sizes and latencies_ms differ in length")
    largest = None
    for batch_size, latency in sorted(zip(batch_sizes, latencies_ms, strict=True)):
        if latency is None or not math.isfinite(latency) or latency > budget_ms:
            break
        largest = batch_size
    return largest


def power_of_two_batch_sizes(limit: int) -> list[int]:
    """1, 2, 4, ... up to and including ``limit`` (``limit`` itself added when not a power of two)."""
    if limit < 1:
        raise ValueError("the batch-size limit must be at least 1")
    sizes = [1]
    while sizes[-1] * 2 <= limit:
        sizes.append(sizes[-1] * 2)
    if sizes[-1] != limit:
        sizes.append(limit)
    return sizes


# ---------------------------------------------------------------- tuner points
@dataclass(frozen=True)
class TunePoint:
    """One served configuration (its settings: one worker count, the decode pool where tried)
    measured under load."""

    model: str
    settings: BatchSettings
    throughput_rps: float = 0.0
    p50_ms: float = math.nan
    p95_ms: float = math.nan
    p99_ms: float = math.nan
    error_rate: float = 0.0
    mean_batch_size: float | None = None
    requests: int = 0
    seconds: float = 0.0
    failure: str | None = None  # set when the point could not be measured (server did not start ...)

    @property
    def decode_threads(self) -> int | str | None:
        """The worker's decode pool (a size or auto), where the point sets one."""
        return self.settings.worker_key(DECODE_THREADS)

    @property
    def label(self) -> str:
        s = self.settings
        workers = "worker" if s.workers == 1 else "workers"
        threads = "" if self.decode_threads is None else f" decodeThreads={self.decode_threads}"
        return (
            f"batchSize={s.batch_size} maxBatchDelay={s.max_batch_delay_ms}ms {s.workers} {workers}" + threads
        )

    @property
    def short_label(self) -> str:
        s = self.settings
        threads = "" if self.decode_threads is None else f" t{self.decode_threads}"
        return f"b{s.batch_size} d{s.max_batch_delay_ms} w{s.workers}{threads}"


def sla_violations(point: TunePoint, sla: Sla) -> list[str]:
    """Every way the point misses the SLA, in words; empty when it meets it."""
    if point.failure:
        return [f"not measured: {point.failure}"]
    if point.requests == 0:
        return ["no request completed in the measured window"]
    reasons = []
    for name in ("p50", "p95", "p99"):
        value, limit = getattr(point, f"{name}_ms"), getattr(sla, f"{name}_ms")
        if not value <= limit:
            reasons.append(f"{name} {value:.0f} ms > {limit:.0f} ms")
    if point.error_rate > sla.max_error_rate:
        reasons.append(f"error rate {point.error_rate:.2%} > {sla.max_error_rate:.2%}")
    if point.throughput_rps < sla.min_throughput_rps:
        reasons.append(f"throughput {point.throughput_rps:.1f} rps < {sla.min_throughput_rps:.1f} rps")
    return reasons


@dataclass(frozen=True)
class PointVerdict:
    """One tuned setting judged: whether it met the SLA, whether it won, and why (not)."""

    point: TunePoint
    meets_sla: bool
    won: bool
    reason: str


@dataclass(frozen=True)
class Selection:
    """The winner (None when nothing meets the SLA) and a verdict for every point."""

    sla: Sla
    winner: TunePoint | None
    verdicts: list[PointVerdict]

    @property
    def message(self) -> str:
        if self.winner is None:
            tried = len(self.verdicts)
            return (
                f"NO configuration of {self.sla.model} meets the {self.sla.profile} SLA "
                f"(p99 <= {self.sla.p99_ms:.0f} ms, errors <= {self.sla.max_error_rate:.2%}, "
                f">= {self.sla.min_throughput_rps:.0f} rps): all {tried} tried failed"
            )
        w = self.winner
        return f"{w.model}: {w.label} wins with {w.throughput_rps:.1f} rps at p99 {w.p99_ms:.0f} ms"


def select_configuration(
    points: Sequence[TunePoint], sla: Sla, tie_tolerance: float = TIE_TOLERANCE
) -> Selection:
    """Highest throughput among the points that meet the SLA.

    Throughputs within ``tie_tolerance`` of the best are treated as equal (run-to-run
    noise is larger than that) and the lowest p99 among them wins, then the smaller
    batch size and fewer workers (less memory for the same result).
    """
    passing = [p for p in points if not sla_violations(p, sla)]
    winner = None
    if passing:
        best = max(p.throughput_rps for p in passing)
        contenders = [p for p in passing if p.throughput_rps >= (1 - tie_tolerance) * best]
        winner = min(
            contenders,
            key=lambda p: (
                p.p99_ms,
                p.settings.batch_size,
                p.settings.workers,
                p.settings.max_batch_delay_ms,
            ),
        )
    verdicts = []
    for point in points:
        violations = sla_violations(point, sla)
        if point is winner:
            reason = f"highest throughput meeting the SLA ({point.throughput_rps:.1f} rps, p99 {point.p99_ms:.0f} ms)"
        elif violations:
            reason = "misses the SLA: " + "; ".join(violations)
        elif winner is not None and point.throughput_rps >= (1 - tie_tolerance) * winner.throughput_rps:
            reason = (
                f"ties on throughput ({point.throughput_rps:.1f} vs {winner.throughput_rps:.1f} rps, within "
                f"{tie_tolerance:.0%}) but p99 {point.p99_ms:.0f} ms vs the winner's {winner.p99_ms:.0f} ms"
                if point.p99_ms > winner.p99_ms
                else f"ties with the winner ({point.throughput_rps:.1f} rps, p99 {point.p99_ms:.0f} ms); "
                "the smaller configuration was preferred"
            )
        else:
            assert winner is not None
            reason = (
                f"meets the SLA but slower: {point.throughput_rps:.1f} rps vs the winner's "
                f"{winner.throughput_rps:.1f} rps"
            )
        verdicts.append(PointVerdict(point, not violations, point is winner, reason))
    return Selection(sla=sla, winner=winner, verdicts=verdicts)


def batch_one_baseline(points: Iterable[TunePoint], sla: Sla) -> TunePoint | None:
    """The best batch-size-1 configuration meeting the same SLA (what you get without batching)."""
    candidates = [p for p in points if p.settings.batch_size == 1 and not sla_violations(p, sla)]
    return max(candidates, key=lambda p: p.throughput_rps, default=None)


# ---------------------------------------------------------------- pruning
def allowed_delays(
    delays_ms: Sequence[int], sla: Sla, share: float = DELAY_SHARE_OF_P99
) -> tuple[list[int], list[int]]:
    """Split candidate batch delays into (kept, dropped): a request can wait the whole
    delay before its batch even starts, so a delay over ``share`` of the p99 ceiling
    leaves too little for queueing and the forward pass and is never tried."""
    limit = share * sla.p99_ms
    kept = sorted({int(d) for d in delays_ms if d <= limit})
    dropped = sorted({int(d) for d in delays_ms if d > limit})
    return kept, dropped


def reachable_batch_sizes(batch_sizes: Sequence[int], concurrency: int | None) -> tuple[list[int], list[int]]:
    """Split batch sizes into (kept, dropped) for a closed-loop load: with C requests in
    flight no batch can hold more than C, so a larger batch size only adds waiting."""
    sizes = sorted(set(batch_sizes))
    if concurrency is None:
        return sizes, []
    return [b for b in sizes if b <= concurrency], [b for b in sizes if b > concurrency]


def stop_growing_batch(
    lane: Sequence[TunePoint], sla: Sla, min_gain: float = MIN_GAIN, patience: int = PATIENCE
) -> str | None:
    """Why not to try a bigger batch after ``lane`` (points of one delay and worker count,
    in increasing batch size), or None to go on.

    Throughput has stopped rising when each of the last ``patience`` points failed to beat
    the best point before it by ``min_gain``; waiting for two such steps keeps one noisy
    reading on a shared machine from ending the lane early.
    """
    if not lane:
        return None
    last = lane[-1]
    if last.failure:
        return f"{last.short_label} could not be measured"
    if last.error_rate > sla.max_error_rate:
        return f"{last.short_label} errors {last.error_rate:.2%} > {sla.max_error_rate:.2%} (overloaded)"
    if len(lane) < patience + 1:
        return None
    stalled = []
    for index in range(len(lane) - patience, len(lane)):
        best_before = max(p.throughput_rps for p in lane[:index])
        if lane[index].throughput_rps >= (1 + min_gain) * best_before:
            return None
        stalled.append(f"{lane[index].short_label} {lane[index].throughput_rps:.1f} rps")
    best = max(lane[: len(lane) - patience], key=lambda p: p.throughput_rps)
    return (
        f"throughput stopped rising: {', '.join(stalled)} vs {best.throughput_rps:.1f} rps at "
        f"{best.short_label} (< +{min_gain:.0%})"
    )


def longer_delay_pointless(shorter: TunePoint, fill: float = FULL_BATCH_FILL) -> str | None:
    """Why a longer maxBatchDelay at the same batch size and workers is not worth trying,
    given the point measured with a shorter one: its batches already came full, so waiting
    longer cannot form bigger ones and can only add latency. None when it might help."""
    if shorter.failure or shorter.mean_batch_size is None or shorter.settings.batch_size <= 1:
        return None
    if shorter.mean_batch_size >= fill * shorter.settings.batch_size:
        return (
            f"{shorter.short_label} already formed full batches (mean {shorter.mean_batch_size:.2f} of "
            f"{shorter.settings.batch_size}): a longer delay cannot fill them more"
        )
    return None
