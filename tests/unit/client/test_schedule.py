"""The open-loop schedule: Poisson arrivals, the same for the load driver and Locust."""

from __future__ import annotations

import random
from itertools import islice, pairwise

from tsbatch.client.schedule import poisson_arrivals


def test_arrivals_average_the_rate_and_never_go_back() -> None:
    dues = list(islice(poisson_arrivals(200.0, 10.0, random.Random(0)), 20000))
    assert dues[0] > 10.0 and all(b > a for a, b in pairwise(dues))
    assert abs((dues[-1] - 10.0) / len(dues) - 1 / 200.0) < 0.05 / 200.0
    gaps = [b - a for a, b in pairwise(dues)]
    assert sum(gap > 3 / 200.0 for gap in gaps) / len(gaps) < 0.07  # exponential: e^-3 ~ 5% are long
