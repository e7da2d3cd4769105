"""The open-loop arrival schedule shared by the load driver and the Locust file.

An open loop sends each request when it is due, whether or not earlier ones were answered,
so queueing in the server shows in the latency instead of slowing the client down.
"""

from __future__ import annotations

import random
from collections.abc import Iterator


def poisson_arrivals(rate_per_s: float, start: float, rng: random.Random) -> Iterator[float]:
    """Due times after ``start`` (on the caller's clock) of Poisson arrivals at ``rate_per_s``."""
    due = start
    while True:
        due += rng.expovariate(rate_per_s)
        yield due
