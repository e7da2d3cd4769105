"""TorchServe's gRPC inference API with a real gRPC client: both models, good and bad inputs
concurrently, the token in the ``authorization`` metadata, errors read from the body."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from tsbatch.client.grpc_inference import GrpcAnswer, GrpcInference
from tsbatch.kinds.image.workload import image_pool
from tsbatch.server.process import TorchServe

RESNET, INTENT = "resnet18", "bert_intent"


@pytest.fixture(scope="module")
def client(torchserve: TorchServe):
    client = GrpcInference(f"127.0.0.1:{torchserve.properties['grpc_inference_port']}", torchserve.token())
    try:
        yield client
    finally:
        client.close()


def test_both_models_answer_good_and_bad_inputs_concurrently(torchserve: TorchServe, client) -> None:
    images = [payload.body for payload in image_pool(seed=5, sides=(48, 96))]
    texts = ["freeze my card", "what's my routing number"]
    over_http = [torchserve.client.predict(RESNET, image).json() for image in images]
    calls = [(RESNET, {"data": image}) for image in images]
    calls += [(INTENT, {"data": text.encode()}) for text in texts]
    calls += [
        (RESNET, {"data": b"not an image"}),
        (INTENT, {"data": b"   "}),
        (RESNET, {"data": json.dumps({"images": ["aGk="]}).encode()}),
        (INTENT, {"data": json.dumps({"texts": [texts[0], ""]}).encode()}),
    ]
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        answers: list[GrpcAnswer] = list(pool.map(lambda call: client.predict(*call), calls))

    good, bad = answers[: len(images) + len(texts)], answers[len(images) + len(texts) :]
    for answer, expected in zip(good[: len(images)], over_http, strict=True):
        assert answer.error is None
        assert [p["index"] for p in answer.body["predictions"]] == [
            p["index"] for p in expected["predictions"]
        ]
    assert [answer.body["model"] for answer in good] == [RESNET] * len(images) + [INTENT] * len(texts)
    assert [answer.error["type"] for answer in bad[:3]] == [
        "invalid_image",
        "invalid_text",
        "all_inputs_rejected",
    ]
    mixed = bad[3].body["results"]
    assert mixed[0]["model"] == INTENT and mixed[1]["error"]["type"] == "invalid_text"


def test_a_call_without_the_token_is_refused_with_a_grpc_status(torchserve: TorchServe) -> None:
    anonymous = GrpcInference(f"127.0.0.1:{torchserve.properties['grpc_inference_port']}", None)
    try:
        with pytest.raises(grpc.RpcError) as refused:
            anonymous.predict(INTENT, {"data": b"freeze my card"})
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    finally:
        anonymous.close()
