"""Per-level throughput and latency of the step/spike shapes, and where adding users stops paying."""

from __future__ import annotations

from tsbatch.sla import levels
from tsbatch.sla.gate import Sample
from tsbatch.sla.levels import LoadLevel


def test_level_stats_and_knee() -> None:
    samples = []
    # 2 users: 20 req/s; 4 users: 38 req/s; 6 users: 40 req/s (flat: the knee is at 4 users)
    for level, (users, rate) in enumerate([(2, 20), (4, 38), (6, 40)]):
        start = 10.0 * level
        samples += [Sample("m", start + i / rate, 10.0 * users, True) for i in range(rate * 10)]
    load = [LoadLevel(2, 0.0, 10.0), LoadLevel(4, 10.0, 20.0), LoadLevel(6, 20.0, 30.0)]
    stats = levels.level_stats(samples, load)
    assert [round(s.throughput_rps) for s in stats] == [20, 38, 40]
    assert [s.p50_ms for s in stats] == [20.0, 40.0, 60.0]
    assert levels.find_knee(stats) == 1
    assert "<- knee" in levels.format_levels(stats).splitlines()[3]
