"""The Open Inference Protocol as tritonclient speaks it, against a real TorchServe serving
both models: its HTTP client with its defaults (binary tensors in, binary out), several
inputs per request mixed with bad ones, malformed binary bodies beside good requests, and
the health, readiness and metadata routes the frontend plugin (plugins/oip) adds. Each
input answered through binary v2 equals the same input sent alone as raw bytes, within
the served precision's tolerance."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
import requests
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from batchkit.tolerance import needs_same_top1, tolerance
from tsbatch.kinds.image.workload import answer_problems as image_problems
from tsbatch.kinds.image.workload import image_pool
from tsbatch.kinds.text.workload import answer_problems as text_problems
from tsbatch.server.process import TorchServe
from tsbatch.server.served import served_decision

RESNET, INTENT = "resnet18", "bert_intent"
TEXTS = [b"freeze my card", b"what's my routing number", b"is it going to rain", "café près d'ici".encode()]


def client(server: TorchServe) -> triton.InferenceServerClient:
    return triton.InferenceServerClient(server.url("inference").split("://", 1)[1], network_timeout=120)


def token(server: TorchServe) -> dict[str, str]:
    """A fresh headers dict per call: tritonclient writes Inference-Header-Content-Length
    into the dict it is given, so a dict reused for a JSON request would carry it along."""
    return server.client.headers("inference")


def bytes_input(name: str, values: list[bytes]) -> triton.InferInput:
    """An input as the client builds it by default: BYTES, sent in the binary extension."""
    tensor = triton.InferInput(name, [len(values)], "BYTES")
    tensor.set_data_from_numpy(np.array(values, dtype=np.object_))
    return tensor


def answers(result: triton.InferResult) -> list[dict[str, Any]]:
    return [json.loads(item) for item in result.as_numpy("predictions")]


def assert_agrees(
    got: dict[str, Any], alone: dict[str, Any], key: str, name: str, server: TorchServe, model: str
) -> None:
    """Same top-1 where the precision asks for it, and each class's probability within
    the served precision's tolerance (batchkit.tolerance)."""
    precision = served_decision(server, model)["precision"]
    if needs_same_top1(precision):
        assert got[key][0][name] == alone[key][0][name]
    want = {item[name]: item["probability"] for item in alone[key]}
    for item in got[key]:
        if item[name] in want:
            assert item["probability"] == pytest.approx(want[item[name]], abs=tolerance(precision))


def test_health_readiness_and_metadata_answer_as_the_protocol_says(torchserve: TorchServe) -> None:
    triton_client = client(torchserve)
    assert triton_client.is_server_live(headers=token(torchserve))
    assert triton_client.is_server_ready(headers=token(torchserve))
    server = triton_client.get_server_metadata(headers=token(torchserve))
    assert server["name"] == "torchserve" and "binary_tensor_data" in server["extensions"]
    for model, input_name in ((RESNET, "image"), (INTENT, "text")):
        assert triton_client.is_model_ready(model, headers=token(torchserve))
        assert triton_client.is_model_ready(model, "1.0", headers=token(torchserve))
        metadata = triton_client.get_model_metadata(model, headers=token(torchserve))
        assert metadata == {
            "name": model,
            "versions": ["1.0"],
            "platform": "pytorch",
            "inputs": [{"name": input_name, "datatype": "BYTES", "shape": [-1, 1]}],
            "outputs": [{"name": "predictions", "datatype": "BYTES", "shape": [-1]}],
        }
    assert not triton_client.is_model_ready("nope", headers=token(torchserve))
    with pytest.raises(
        InferenceServerException, match=r"model 'nope' is not served; models: \[bert_intent, resnet18\]"
    ):
        triton_client.get_model_metadata("nope", headers=token(torchserve))
    base = torchserve.url("inference")
    unknown = requests.get(f"{base}/v2/models/{RESNET}/stats", headers=token(torchserve), timeout=30)
    assert unknown.status_code == 404 and "no such Open Inference Protocol route" in unknown.json()["error"]
    # Draining (the preStop hook's file, in TorchServe's working directory by default):
    # the server stays live but is no longer ready, as deploy/probe.py ready reports.
    marker = torchserve.run_dir / "draining"
    marker.touch()
    try:
        ready = requests.get(f"{base}/v2/health/ready", headers=token(torchserve), timeout=30)
        assert ready.status_code == 503 and "draining" in ready.json()["error"]
        assert triton_client.is_server_live(headers=token(torchserve))
        assert triton_client.is_model_ready(RESNET, headers=token(torchserve)), "a model stays ready"
    finally:
        marker.unlink()
    assert triton_client.is_server_ready(headers=token(torchserve))
    # The routes sit behind TorchServe's token check like every inference route.
    assert requests.get(f"{base}/v2/health/live", timeout=30).status_code == 400


def malformed_body(server: TorchServe, model: str) -> requests.Response:
    """A binary body whose input claims more bytes than follow its JSON header."""
    header = json.dumps(
        {"inputs": [{"name": "x", "datatype": "BYTES", "shape": [1], "parameters": {"binary_data_size": 64}}]}
    ).encode()
    headers = {**server.client.headers("inference"), "Inference-Header-Content-Length": str(len(header))}
    return requests.post(
        f"{server.url('inference')}/v2/models/{model}/infer",
        data=header + b"\x03\x00\x00\x00abc",
        headers=headers,
        timeout=120,
    )


def test_images_in_binary_v2_with_bad_inputs_equal_each_image_sent_alone(torchserve: TorchServe) -> None:
    images = [payload.body for payload in image_pool(seed=5, sides=(48, 96, 224))][:4]
    alone = []
    for image in images:
        response = torchserve.client.predict(RESNET, image)
        assert response.status_code == 200, response.text
        alone.append(response.json())
    calls = {
        "mixed": lambda: client(torchserve).infer(
            RESNET,
            [bytes_input("image", [images[0], b"not an image", images[1], b""])],
            headers=token(torchserve),
        ),
        "good": lambda: client(torchserve).infer(
            RESNET, [bytes_input("image", [images[2], images[3]])], headers=token(torchserve), request_id="r2"
        ),
        "malformed": lambda: malformed_body(torchserve, RESNET),
    }
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = {name: pool.submit(call) for name, call in calls.items()}
        results = {name: future.result() for name, future in futures.items()}

    mixed, good = answers(results["mixed"]), answers(results["good"])
    assert results["good"].get_response()["id"] == "r2"
    assert results["good"].get_output("predictions")["parameters"]["binary_data_size"] > 0
    for got, index in ((mixed[0], 0), (mixed[2], 1), (good[0], 2), (good[1], 3)):
        assert image_problems(got, RESNET) == []
        assert_agrees(got, alone[index], "predictions", "index", torchserve, RESNET)
    assert mixed[1]["error"]["type"] == "invalid_image"
    assert mixed[3]["error"] == {"type": "invalid_image", "message": "empty request body"}
    malformed = results["malformed"]
    assert malformed.status_code == 400
    assert "has binary_data_size 64 but only 7 bytes follow the JSON header" in malformed.text


def test_texts_in_binary_v2_with_bad_inputs_equal_each_text_sent_alone(torchserve: TorchServe) -> None:
    alone = [torchserve.client.predict(INTENT, text, content_type="text/plain").json() for text in TEXTS]
    triton_client = client(torchserve)
    result = triton_client.infer(
        INTENT, [bytes_input("text", [TEXTS[0], b" ", TEXTS[1], b"\xff\xfe"])], headers=token(torchserve)
    )
    got = answers(result)
    assert [got[0]["intent"], got[2]["intent"]] == [alone[0]["intent"], alone[1]["intent"]]
    for answer, index in ((got[0], 0), (got[2], 1)):
        assert text_problems(answer, INTENT) == []
        assert_agrees(answer, alone[index], "top_k", "intent", torchserve, INTENT)
    assert got[1]["error"] == {"type": "invalid_text", "message": "text is empty"}
    assert "not valid UTF-8" in got[3]["error"]["message"]

    # JSON in and out, the output asked for by name; the answers are the same ones.
    tensor = triton.InferInput("text", [2], "BYTES")
    tensor.set_data_from_numpy(np.array(TEXTS[2:], dtype=np.object_), binary_data=False)
    output = triton.InferRequestedOutput("predictions", binary_data=False)
    json_result = triton_client.infer(INTENT, [tensor], outputs=[output], headers=token(torchserve))
    assert "parameters" not in json_result.get_output("predictions")
    for answer, index in zip(answers(json_result), (2, 3), strict=True):
        assert_agrees(answer, alone[index], "top_k", "intent", torchserve, INTENT)

    # An output the model does not have is a 400 naming the ones it has.
    with pytest.raises(InferenceServerException, match=r"unknown output 'predict'.*\['predictions'\]"):
        triton_client.infer(
            INTENT,
            [bytes_input("text", TEXTS[:1])],
            outputs=[triton.InferRequestedOutput("predict")],
            headers=token(torchserve),
        )
    assert malformed_body(torchserve, INTENT).status_code == 400
