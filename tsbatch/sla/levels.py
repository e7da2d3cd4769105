"""Load levels of the step and spike shapes: throughput and latency per user count, and the knee."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tsbatch.sla.gate import Sample, Window, latency_percentiles


@dataclass(frozen=True)
class LoadLevel:
    """A stretch of the run at one user count: ``[start, end)`` in epoch seconds."""

    users: int
    start: float
    end: float


@dataclass(frozen=True)
class LevelStats:
    users: int
    seconds: float
    requests: int
    failures: int
    throughput_rps: float
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None


def level_stats(samples: Sequence[Sample], levels: Sequence[LoadLevel]) -> list[LevelStats]:
    """All models together, per load level: how throughput and latency move as users grow."""
    stats = []
    for level in levels:
        window = Window(level.start, level.end)
        chosen = [s for s in samples if window.contains(s.start)]
        latencies = sorted(s.response_time_ms for s in chosen if s.response_time_ms is not None)
        failures = sum(not s.ok for s in chosen)
        seconds = window.seconds
        throughput = (len(chosen) - failures) / seconds if seconds > 0 else 0.0
        stats.append(
            LevelStats(
                level.users, seconds, len(chosen), failures, throughput, *latency_percentiles(latencies)
            )
        )
    return stats


def find_knee(stats: Sequence[LevelStats], min_gain: float = 0.10) -> int | None:
    """Index of the last level before adding users stopped paying: throughput rose by less
    than ``min_gain`` (relative) over the previous level. ``None`` if it kept scaling."""
    for index in range(1, len(stats)):
        previous, current = stats[index - 1], stats[index]
        if current.users <= previous.users or previous.throughput_rps <= 0:
            continue
        if current.throughput_rps < previous.throughput_rps * (1 + min_gain):
            return index - 1
    return None


def format_levels(stats: Sequence[LevelStats]) -> str:
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    knee = find_knee(stats)
    lines = [
        "Load levels (all models; each level's ramp excluded):",
        "users  seconds  req/s   p50 ms  p95 ms  p99 ms  failed",
    ]
    for index, level in enumerate(stats):
        mark = "  <- knee: more users stopped adding throughput" if index == knee else ""
        lines.append(
            f"{level.users:>5}  {level.seconds:>7.1f}  {level.throughput_rps:>6.1f}  {ms(level.p50_ms):>6}  "
            f"{ms(level.p95_ms):>6}  {ms(level.p99_ms):>6}  {level.failures:>6}{mark}"
        )
    return "\n".join(lines)
