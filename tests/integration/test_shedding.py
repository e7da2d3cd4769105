"""Deadline shedding that sheds only what would be late, through a real TorchServe at the
shipped batch settings: a trickle broken by bursts sheds (next to) nothing the same traffic
without deadlines answered in time, and a request of many inputs counts every one of them."""

from __future__ import annotations

import argparse
import base64
import json
import time

import pytest
import requests

from tests.integration.test_resnet_serving import digit_png
from tsbatch.bench.trickle_burst import compare
from tsbatch.server.process import TorchServe

pytestmark = pytest.mark.serial  # timed under load: run alone

MODEL = "resnet18"
BUDGET_MS = 50.0


@pytest.fixture(scope="module")
def server(torchserve: TorchServe) -> TorchServe:
    """The session's instance (the shipped settings): its other model idles through the runs."""
    return torchserve


@pytest.mark.slow  # a comparison of latencies: meaningful on a quiet machine only
def test_a_trickle_broken_by_bursts_sheds_nothing_that_would_have_been_on_time(server: TorchServe) -> None:
    pattern = argparse.Namespace(bursts=4, burst=8, trickle=4, gap_ms=100.0)
    result = compare(server, MODEL, BUDGET_MS, pattern)
    print(f"\n[shedding] {result.row()}")
    # A share, not zero: latencies on a shared 2-core host swing a burst's time by several ms.
    assert result.wrong_sheds <= 4, (
        f"shed {result.wrong_sheds} requests the run without deadlines answered in time"
    )


def test_every_input_of_a_multi_input_request_counts_against_its_deadline(server: TorchServe) -> None:
    """32 images in one request: once the worker has run such batches, a deadline shorter
    than their time is a 503 before compute, never a 200 after the deadline."""
    url = f"{server.url('inference')}/predictions/{MODEL}"
    image = base64.b64encode(digit_png(3, 300)).decode()
    body = json.dumps({"instances": [image] * 32})
    headers = {**server.client.headers(), "Content-Type": "application/json"}
    took = []
    for _ in range(3):  # teach the worker a 32-input batch's time
        started = time.time()
        assert requests.post(url, data=body, headers=headers, timeout=60).status_code == 200
        took.append((time.time() - started) * 1000)
    budget_ms = min(took) / 2
    started = time.time()
    deadline = {"X-Request-Deadline-Ms": f"{started * 1000 + budget_ms:.0f}"}
    response = requests.post(url, data=body, headers={**headers, **deadline}, timeout=60)
    late_ms = (time.time() - started) * 1000 - budget_ms
    assert response.status_code == 503, f"answered {response.status_code}, {late_ms:.0f} ms past its deadline"
    assert response.json()["error"]["type"] == "deadline_exceeded"
