"""Every way clients pack inputs, through a real TorchServe serving both models: our list
schema, KServe v1 and v2 bodies, multipart with several files, data URLs, MIME base64,
and curl's form-encoded default. Each input answered inside a multi-input request equals
the same input sent alone."""

from __future__ import annotations

import base64
import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests
from PIL import Image

from tests.integration.support import served_tolerance
from tsbatch.kinds.image.examples import encode
from tsbatch.kinds.image.workload import answer_problems as image_problems
from tsbatch.kinds.image.workload import image_pool
from tsbatch.kinds.text.workload import answer_problems as text_problems
from tsbatch.server.process import TorchServe

RESNET, INTENT = "resnet18", "bert_intent"
TEXTS = ["freeze my card", "what's my routing number", "how do I change my PIN", "is it going to rain"]
COUNTED = ["BatchedInputsTotal", "BatchedRequestsTotal"]


def post(server: TorchServe, model: str, **kwargs: Any) -> requests.Response:
    # A session per call: the test's threads must not share one connection pool.
    with requests.Session() as session:
        headers = {**server.client.headers("inference"), **kwargs.pop("headers", {})}
        return session.post(
            f"{server.url('inference')}/predictions/{model}", headers=headers, timeout=120, **kwargs
        )


def post_json(server: TorchServe, model: str, document: Any) -> requests.Response:
    return post(server, model, json=document)


def v2(name: str, data: list[str]) -> dict[str, Any]:
    return {
        "id": "req-1",
        "inputs": [{"name": name, "datatype": "BYTES", "shape": [len(data)], "data": data}],
    }


def assert_same(answer: dict[str, Any], alone: dict[str, Any], key: str, name: str, within: float) -> None:
    """Same ranking and probabilities within the served precision's tolerance."""
    assert [item[name] for item in answer[key]] == [item[name] for item in alone[key]]
    for got, want in zip(answer[key], alone[key], strict=True):
        assert got["probability"] == pytest.approx(want["probability"], abs=within)


@pytest.fixture(scope="module")
def images() -> list[bytes]:
    return [payload.body for payload in image_pool(seed=3, sides=(48, 96, 224))]


def test_images_in_every_protocol_concurrently_with_bad_inputs(torchserve: TorchServe, images) -> None:
    alone = []
    for image in images:
        response = torchserve.client.predict(RESNET, image)
        assert response.status_code == 200, response.text
        alone.append(response.json())
    b64 = [base64.b64encode(image).decode() for image in images]
    before = torchserve.settled_counters(RESNET, COUNTED)
    calls = {
        "list": lambda: post_json(torchserve, RESNET, {"images": [b64[0], "not base64!", b64[1]]}),
        "v1": lambda: post_json(
            torchserve, RESNET, {"instances": [{"data": b64[2]}, {"b64": b64[3]}, {"x": 1}]}
        ),
        "v2": lambda: post_json(torchserve, RESNET, v2("image", [b64[4], base64.b64encode(b"no").decode()])),
        "data_url": lambda: post_json(torchserve, RESNET, {"image": f"data:image/png;base64,{b64[5]}"}),
        "mime": lambda: post_json(torchserve, RESNET, {"image": base64.encodebytes(images[0]).decode()}),
        "multipart": lambda: post(torchserve, RESNET, files={"first": images[1], "second": images[2]}),
        "all_bad": lambda: post_json(torchserve, RESNET, {"images": ["", "aGk="]}),
        "too_many": lambda: post_json(torchserve, RESNET, {"images": [b64[0]] * 33}),
        "single": lambda: torchserve.client.predict(RESNET, images[3]),
    }
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = {name: pool.submit(call) for name, call in calls.items()}
        responses = {name: future.result() for name, future in futures.items()}
    statuses = {name: response.status_code for name, response in responses.items()}
    assert statuses == {**dict.fromkeys(calls, 200), "all_bad": 400, "too_many": 413}, statuses
    body = {name: response.json() for name, response in responses.items()}

    answered = [
        (body["list"]["results"][0], 0),
        (body["list"]["results"][2], 1),
        (body["v1"]["predictions"][0], 2),
        (body["v1"]["predictions"][1], 3),
        (json.loads(body["v2"]["outputs"][0]["data"][0]), 4),
        (body["data_url"], 5),
        (body["mime"], 0),
        (body["multipart"]["results"][0], 1),
        (body["multipart"]["results"][1], 2),
        (body["single"], 3),
    ]
    for answer, index in answered:
        assert image_problems(answer, RESNET) == []
        assert_same(answer, alone[index], "predictions", "index", served_tolerance(torchserve, "resnet18"))
    assert "not valid base64" in body["list"]["results"][1]["error"]["message"]
    assert body["v1"]["predictions"][2]["error"]["type"] == "invalid_image"
    assert json.loads(body["v2"]["outputs"][0]["data"][1])["error"]["type"] == "invalid_image"
    assert (body["v2"]["model_name"], body["v2"]["id"]) == (RESNET, "req-1")
    assert body["all_bad"]["error"]["type"] == "all_inputs_rejected"
    assert "the limit is 32 per request" in body["too_many"]["error"]["message"]

    inputs = 3 + 3 + 2 + 1 + 1 + 2 + 2 + 1  # too_many is refused before its inputs count
    after = torchserve.settled_counters(
        RESNET, COUNTED, at_least={"BatchedInputsTotal": before["BatchedInputsTotal"] + inputs}
    )
    assert after["BatchedInputsTotal"] - before["BatchedInputsTotal"] == inputs
    assert after["BatchedRequestsTotal"] - before["BatchedRequestsTotal"] == len(calls)


def test_texts_in_every_protocol_concurrently_with_bad_inputs(torchserve: TorchServe) -> None:
    alone = [
        post(torchserve, INTENT, data=text.encode(), headers={"Content-Type": "text/plain"}) for text in TEXTS
    ]
    assert all(response.status_code == 200 for response in alone)
    expected = [response.json() for response in alone]
    calls = {
        "list": lambda: post_json(torchserve, INTENT, {"texts": [TEXTS[0], " ", TEXTS[1]]}),
        "json_list": lambda: post_json(torchserve, INTENT, [TEXTS[2], TEXTS[3]]),
        "v1": lambda: post_json(torchserve, INTENT, {"instances": [TEXTS[3], {"data": TEXTS[0]}, 5]}),
        "v2": lambda: post_json(torchserve, INTENT, v2("text", [TEXTS[1], ""])),
        "all_bad": lambda: post_json(torchserve, INTENT, {"instances": ["", " "]}),
        "single": lambda: post_json(torchserve, INTENT, {"text": TEXTS[2]}),
    }
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = {name: pool.submit(call) for name, call in calls.items()}
        responses = {name: future.result() for name, future in futures.items()}
    statuses = {name: response.status_code for name, response in responses.items()}
    assert statuses == {**dict.fromkeys(calls, 200), "all_bad": 400}, statuses
    body = {name: response.json() for name, response in responses.items()}
    answered = [
        (body["list"]["results"][0], 0),
        (body["list"]["results"][2], 1),
        (body["json_list"]["results"][0], 2),
        (body["json_list"]["results"][1], 3),
        (body["v1"]["predictions"][0], 3),
        (body["v1"]["predictions"][1], 0),
        (json.loads(body["v2"]["outputs"][0]["data"][0]), 1),
        (body["single"], 2),
    ]
    for answer, index in answered:
        assert text_problems(answer, INTENT) == []
        assert answer["intent"] == expected[index]["intent"]
        assert_same(answer, expected[index], "top_k", "intent", served_tolerance(torchserve, "bert_intent"))
    assert body["list"]["results"][1]["error"] == {"type": "invalid_text", "message": "text is empty"}
    assert body["v1"]["predictions"][2]["error"]["type"] == "invalid_text"
    assert json.loads(body["v2"]["outputs"][0]["data"][1])["error"]["type"] == "invalid_text"


def form_safe_image() -> bytes:
    """A small flat PNG (no '%' byte: TorchServe's form decoder answers 500 itself on a bad
    %-escape, before any handler runs)."""
    body = encode(Image.new("RGB", (32, 32), (200, 30, 30)), "PNG")
    assert b"%" not in body
    return body


@pytest.mark.parametrize("model", [RESNET, INTENT])
def test_curl_data_binary_without_a_content_type_gets_a_400_naming_the_header(
    torchserve: TorchServe, model: str, tmp_path
) -> None:
    """curl sends -d/--data-binary as application/x-www-form-urlencoded; TorchServe parses
    that as a form and the handler receives no field at all."""
    body = tmp_path / "body"
    body.write_bytes(form_safe_image() if model == RESNET else b"freeze my card")
    url = f"{torchserve.url('inference')}/predictions/{model}"
    token = torchserve.client.headers()["Authorization"]
    command = ["curl", "-s", "-w", "\n%{http_code}", "-H", f"Authorization: {token}"]
    result = subprocess.run(
        [*command, "--data-binary", f"@{body}", url], capture_output=True, text=True, check=True
    )
    text, status = result.stdout.rsplit("\n", 1)
    assert status == "400", text
    message = json.loads(text)["error"]["message"]
    assert (
        "form" in message
        and "-H 'Content-Type: application/octet-stream'" in message
        and "curl -T" in message
    )
    uploaded = subprocess.run(
        [*command, "-T", str(body), "-X", "POST", url], capture_output=True, text=True, check=True
    )
    assert uploaded.stdout.rsplit("\n", 1)[1] == "200"


def test_kserve_paths_take_the_kserve_bodies(torchserve: TorchServe, images) -> None:
    """What a KServe client calls: /v1/models/<m>:predict and /v2/models/<m>/infer."""
    b64 = base64.b64encode(images[0]).decode()
    headers = {**torchserve.client.headers("inference"), "Content-Type": "application/json"}
    base = torchserve.url("inference")
    for model, value in ((RESNET, b64), (INTENT, TEXTS[0])):
        v1 = requests.post(f"{base}/v1/models/{model}:predict", json={"instances": [value]}, headers=headers)
        assert v1.status_code == 200, v1.text
        infer = requests.post(
            f"{base}/v2/models/{model}/infer", json=v2("x", [value, value]), headers=headers
        )
        assert infer.status_code == 200, infer.text
        (output,) = infer.json()["outputs"]
        answers = [*v1.json()["predictions"], *(json.loads(item) for item in output["data"])]
        assert len({json.dumps(top(answer)) for answer in answers}) == 1


def top(answer: dict[str, Any]) -> Any:
    """The ranking an answer gives (probabilities may differ in the last digits between batches)."""
    return [p["index"] for p in answer["predictions"]] if "predictions" in answer else answer["intent"]
