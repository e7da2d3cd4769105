"""The intent classifier in a real TorchServe: answers, batching, bad input, truncation, order."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from tests.integration.support import served_tolerance
from tsbatch.archive.package import private_store
from tsbatch.server.process import TorchServe

MODEL = "bert_intent"
TEXT = "text/plain; charset=utf-8"
# Long enough for a concurrent burst to be served as one batch.
BATCHING = {MODEL: {"batchSize": 8, "maxBatchDelay": 300}}

LONG_TEXT = (
    "I was at the grocery store this afternoon buying food for the week and when I tried to pay "
    "the terminal said my card was declined even though I know there is plenty of money on it, "
    "and then it happened again at the gas station, so what is going on with my card "
) * 3


@pytest.fixture(scope="module")
def batching_server(start_server, model_store: Path, tmp_path_factory: pytest.TempPathFactory) -> TorchServe:
    # The archive's model-config.yaml wins over config.properties: repackage with BATCHING,
    # from the artifacts the model_store fixture built.
    properties, store = private_store(tmp_path_factory.mktemp("batching"), [MODEL], BATCHING)
    return start_server(store, [MODEL], source=properties)


def predict(server: TorchServe, body: bytes | str, content_type: str = TEXT) -> requests.Response:
    # A session per call: the test's threads must not share one connection pool.
    with requests.Session() as session:
        headers = {**server.client.headers("inference"), "Content-Type": content_type}
        data = body.encode("utf-8") if isinstance(body, str) else body
        return session.post(
            f"{server.url('inference')}/predictions/{MODEL}", data=data, headers=headers, timeout=60
        )


def burst(server: TorchServe, requests_: list[tuple[bytes | str, str]]) -> list[requests.Response]:
    """Send all requests at once (one thread each) and return the responses in order."""
    with ThreadPoolExecutor(max_workers=len(requests_)) as pool:
        return list(pool.map(lambda item: predict(server, *item), requests_))


@pytest.mark.parametrize(
    ("text", "intent"),
    [
        ("what's my routing number", "routing"),
        ("my card got declined at the store", "card_declined"),
        ("how do I change my PIN", "pin_change"),
        ("what's the weather going to be tomorrow", "oos"),
    ],
)
def test_real_model_recognises_plain_requests(torchserve: TorchServe, text: str, intent: str) -> None:
    response = predict(torchserve, text)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["model"] == MODEL
    assert result["intent"] == intent
    assert result["in_scope"] == (intent != "oos")
    assert result["truncated"] is False
    assert 0 < result["confidence"] <= 1
    assert [entry["probability"] for entry in result["top_k"]] == sorted(
        (entry["probability"] for entry in result["top_k"]), reverse=True
    )


def test_json_body_gets_the_same_answer_as_plain_text(torchserve: TorchServe) -> None:
    plain = predict(torchserve, "I lost my credit card").json()
    as_json = predict(torchserve, json.dumps({"text": "I lost my credit card"}), "application/json").json()
    assert plain == as_json
    assert plain["intent"] == "report_lost_card"


def test_mixed_batch_answers_each_request_in_order_like_alone(batching_server: TorchServe) -> None:
    good = [
        "balance",
        "please move three hundred dollars from my checking account into my savings account before friday",
        "freeze my account",
        "what's the apr on my visa",
        LONG_TEXT,
    ]
    counted = ["BatchedRequestsTotal", "BatchesTotal"]
    start = batching_server.settled_counters(MODEL, counted)
    alone = [predict(batching_server, text).json() for text in good]
    before = batching_server.settled_counters(
        MODEL, counted, at_least={"BatchedRequestsTotal": start["BatchedRequestsTotal"] + len(good)}
    )
    batch = [
        (good[0], TEXT),
        ("   ", TEXT),
        (good[1], TEXT),
        (b"\xff\xfe\xfd not utf-8", TEXT),
        (good[2], TEXT),
        (json.dumps({"message": "wrong key"}), "application/json"),
        (good[3], TEXT),
        (good[4], TEXT),
    ]
    responses = burst(batching_server, batch)
    assert [r.status_code for r in responses] == [200, 400, 200, 400, 200, 400, 200, 200]
    for index in (1, 3, 5):
        assert responses[index].json()["error"]["type"] == "invalid_text"
    served = [responses[i].json() for i in (0, 2, 4, 6, 7)]
    for single, batched in zip(alone, served, strict=True):
        assert batched["intent"] == single["intent"]
        assert batched["truncated"] == single["truncated"]
        assert [e["intent"] for e in batched["top_k"]] == [e["intent"] for e in single["top_k"]]
        for a, b in zip(single["top_k"], batched["top_k"], strict=True):
            assert a["probability"] == pytest.approx(
                b["probability"], abs=served_tolerance(batching_server, MODEL)
            )
    assert served[-1]["truncated"] is True and served[-1]["intent"] == "card_declined"
    # The burst really was batched: fewer batches than requests since the last scrape.
    after = batching_server.settled_counters(
        MODEL, counted, at_least={"BatchedRequestsTotal": before["BatchedRequestsTotal"] + len(batch)}
    )
    requests_ = after["BatchedRequestsTotal"] - before["BatchedRequestsTotal"]
    batches = after["BatchesTotal"] - before["BatchesTotal"]
    assert requests_ == len(batch)
    assert batches < requests_
    metrics = batching_server.client.metrics_text()
    assert re.search(rf'^PaddingEfficiency\{{[^}}]*ModelName="{MODEL}"', metrics, flags=re.MULTILINE)


def test_many_concurrent_requests_keep_their_own_answers(batching_server: TorchServe) -> None:
    texts = [
        "what is my credit limit",
        "how many reward points do I have",
        "order more checks",
        "when is my bill due",
        "set a timer for ten minutes",
        "is there a fee for using my card in france",
        "my card is damaged and the chip doesn't work anymore",
        "transfer money to my brother",
    ] * 2
    expected = {text: predict(batching_server, text).json() for text in set(texts)}
    responses = burst(batching_server, [(text, TEXT) for text in texts])
    for text, response in zip(texts, responses, strict=True):
        assert response.status_code == 200
        result = response.json()
        assert result["intent"] == expected[text]["intent"], text
        assert result["confidence"] == pytest.approx(
            expected[text]["confidence"], abs=served_tolerance(batching_server, MODEL)
        )


def test_oversized_body_is_refused_alone(batching_server: TorchServe) -> None:
    responses = burst(batching_server, [("x" * 70_000, TEXT), ("what's my balance", TEXT)])
    assert [r.status_code for r in responses] == [413, 200]
    assert responses[0].json()["error"]["type"] == "payload_too_large"
    assert responses[1].json()["intent"] == "balance"
