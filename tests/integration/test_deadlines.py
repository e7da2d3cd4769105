"""Deadline shedding inside a batch, through a real TorchServe: the frontend forwards the
client's X-Request-Deadline-Ms header, the batch core answers the late request 503 before
decode and compute, and its batch-mates get their answers."""

from __future__ import annotations

import http.client
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from tests.integration.test_resnet_serving import digit_png
from tsbatch.archive.package import private_store
from tsbatch.server.process import TorchServe

pytestmark = pytest.mark.serial  # timed under load: run alone

MODEL = "resnet18"
# A batch of three fills at once; the delay only matters if a request is slow to arrive.
BATCHING = {MODEL: {"batchSize": 3, "maxBatchDelay": 2000}}
COUNTED = ["ShedRequestsTotal", "BatchesTotal", "BatchedRequestsTotal"]


@pytest.fixture(scope="module")
def server(start_server, model_store: Path, tmp_path_factory: pytest.TempPathFactory) -> TorchServe:
    # The archive's model-config.yaml wins over config.properties: repackage with BATCHING,
    # from the artifacts the model_store fixture built.
    properties, store = private_store(tmp_path_factory.mktemp("batching"), [MODEL], BATCHING)
    return start_server(store, [MODEL], source=properties)


def send_trio(server: TorchServe) -> tuple[dict[str, requests.Response], dict[str, float]]:
    """An expired, an on-time and a deadline-free request at once; their answers and the
    counters' rise."""
    url = f"{server.url('inference')}/predictions/{MODEL}"
    now_ms = time.time() * 1000
    deadlines = {"expired": now_ms - 5000, "on time": now_ms + 120_000, "none": None}
    answers: dict[str, requests.Response] = {}

    def send(name: str, deadline: float | None) -> None:
        headers = {**server.client.headers("inference"), "Content-Type": "application/octet-stream"}
        if deadline is not None:
            headers["X-Request-Deadline-Ms"] = f"{deadline:.0f}"
        answers[name] = requests.post(url, data=digit_png(7, 32), headers=headers, timeout=60)

    before = server.settled_counters(MODEL, COUNTED)
    threads = [threading.Thread(target=send, args=item) for item in deadlines.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    after = server.settled_counters(
        MODEL, COUNTED, at_least={"BatchedRequestsTotal": before.get("BatchedRequestsTotal", 0.0) + 3}
    )
    return answers, {name: after.get(name, 0.0) - before.get(name, 0.0) for name in COUNTED}


def test_expired_on_time_and_no_deadline_in_one_batch(server: TorchServe) -> None:
    # The frontend forms the batch, not the handler: a trio it happens to split is sent again.
    for _ in range(3):
        answers, rise = send_trio(server)
        expired = answers["expired"]
        assert expired.status_code == 503, expired.text
        assert expired.json()["error"]["type"] == "deadline_exceeded", expired.text
        assert "passed" in expired.json()["error"]["message"]
        for name in ("on time", "none"):
            assert answers[name].status_code == 200, answers[name].text
            assert answers[name].json()["predictions"][0]["label"] == "7"
        assert rise["ShedRequestsTotal"] == 1
        if rise["BatchesTotal"] == 1:
            return
    pytest.fail(f"the three never came in one batch: {rise}")


def test_a_deadline_that_is_no_number_is_a_400_for_that_request(server: TorchServe) -> None:
    headers = {
        **server.client.headers("inference"),
        "Content-Type": "application/octet-stream",
        "X-Request-Deadline-Ms": "soon",
    }
    response = requests.post(
        f"{server.url('inference')}/predictions/{MODEL}", data=digit_png(7, 32), headers=headers, timeout=60
    )
    assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_deadline", (
        response.text
    )


def test_a_default_budget_counts_from_the_proxy_s_arrival_stamp(start_server, tmp_path: Path) -> None:
    """deadlineBudgetMs in config.properties reaches the worker through the archive: a request
    the proxy stamped longer ago than the budget is shed, a fresh one, one without a stamp
    and one with its own deadline are computed, and a stamp that is no time is a 400."""
    properties, store = private_store(tmp_path / "serve", [MODEL], {MODEL: {"deadlineBudgetMs": 60_000}})
    budget_server = start_server(store, [MODEL], source=properties)
    now_ms = time.time() * 1000
    stamps = {
        "stale": {"X-Request-Start": f"t={(now_ms - 120_000) / 1000:.3f}"},  # nginx's ${msec}
        "fresh": {"X-Request-Start": f"{now_ms:.0f}"},  # Heroku's milliseconds
        "none": {},
        "own deadline": {"X-Request-Start": "0.5", "X-Request-Deadline-Ms": f"{now_ms + 60_000:.0f}"},
        "no time": {"X-Request-Start": "t=yesterday"},
    }
    statuses = {}
    for name, extra in stamps.items():
        headers = {
            **budget_server.client.headers("inference"),
            "Content-Type": "application/octet-stream",
            **extra,
        }
        response = requests.post(
            f"{budget_server.url('inference')}/predictions/{MODEL}",
            data=digit_png(7, 32),
            headers=headers,
            timeout=60,
        )
        statuses[name] = (response.status_code, response.json().get("error", {}).get("type"))
    assert statuses == {
        "stale": (503, "deadline_exceeded"),
        "fresh": (200, None),
        "none": (200, None),
        "own deadline": (200, None),
        "no time": (400, "invalid_deadline"),
    }


def raw_post(server: TorchServe, extra: list[tuple[str, str]]) -> tuple[int, dict[str, str], str]:
    """A POST whose headers are sent exactly as listed (two of one name, any spelling)."""
    address = urlsplit(server.url("inference"))
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=60)
    body = digit_png(7, 32)
    connection.putrequest("POST", f"/predictions/{MODEL}")
    for name, value in [
        *server.client.headers("inference").items(),
        ("Content-Type", "application/octet-stream"),
        *extra,
    ]:
        connection.putheader(name, value)
    connection.putheader("Content-Length", str(len(body)))
    connection.endheaders(body)
    response = connection.getresponse()
    answer = (response.status, dict(response.getheaders()), response.read().decode())
    connection.close()
    return answer


def test_deadline_units_duplicates_and_a_deadline_passed_on_arrival(server: TorchServe) -> None:
    """Seconds, microseconds and 1e30 are 400s naming the unit; two spellings are a 400 like
    the comma form; a deadline before the proxy's arrival stamp is a 503 without Retry-After.
    Two headers of one spelling reach the handler as the last one only (TorchServe 0.12's
    header map), as docs/api.md says."""
    now_ms = time.time() * 1000
    cases = {
        "seconds": [("X-Request-Deadline-Ms", f"{now_ms / 1000 + 60:.3f}")],
        "microseconds": [("X-Request-Deadline-Ms", f"{(now_ms + 60_000) * 1000:.0f}")],
        "1e30": [("X-Request-Deadline-Ms", "1e30")],
        "comma": [("X-Request-Deadline-Ms", f"{now_ms + 60_000:.0f}, {now_ms + 90_000:.0f}")],
        "two spellings": [
            ("X-Request-Deadline-Ms", f"{now_ms + 60_000:.0f}"),
            ("x-request-deadline-ms", f"{now_ms + 90_000:.0f}"),
        ],
        "passed on arrival": [
            ("X-Request-Start", f"{now_ms:.0f}"),
            ("X-Request-Deadline-Ms", f"{now_ms - 3_600_000:.0f}"),
        ],
        "same spelling twice": [
            ("X-Request-Deadline-Ms", f"{now_ms - 3_600_000:.0f}"),
            ("X-Request-Deadline-Ms", f"{now_ms + 60_000:.0f}"),
        ],
    }
    answers: dict[str, tuple[int, dict[str, str], str]] = {}

    def send(name: str) -> None:
        answers[name] = raw_post(server, cases[name])

    threads = [threading.Thread(target=send, args=(name,)) for name in cases]  # batches fill at once
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name, unit in (("seconds", "seconds"), ("microseconds", "microseconds"), ("1e30", "no time")):
        status, _, text = answers[name]
        assert status == 400 and "invalid_deadline" in text and unit in text and "milliseconds" in text, text
    for name in ("comma", "two spellings"):
        status, _, text = answers[name]
        assert status == 400 and "sent 2 times" in text, text
    status, headers, text = answers["passed on arrival"]
    assert status == 503 and "before it reached the server" in text, text
    assert "Retry-After" not in headers
    assert answers["same spelling twice"][0] == 200, answers["same spelling twice"][2]
