"""The one percentile of the toolkit: exact nearest-rank, as the SLA gate judges.

Every figure that is compared with an SLA target (the gate, the tuner, the benchmarks, the
sweep, the integration tests' reports) comes from this function, so a p99 printed by one
tool means the same as a p99 printed by another: always a latency that was observed, the
smallest one at or above ``q`` percent of the requests, never an interpolation or a bucket.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float, *, is_sorted: bool = False) -> float:
    """Nearest-rank percentile ``q`` (0..100) of ``values``; raises on an empty sequence."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    ordered = values if is_sorted else sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return float(ordered[rank - 1])
