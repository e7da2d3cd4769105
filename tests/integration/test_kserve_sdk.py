"""The KServe Python SDK's REST client (``kserve.InferenceRESTClient``) against a real
TorchServe serving both models: v1 predict, v2 infer in JSON and in binary tensors, model
readiness in both protocols, server liveness and readiness, each call as the SDK makes it
(its v2 body names the model beside "id" and "inputs"). Bad inputs get their own errors
beside good ones; a v2 body that names another model than its path is a 400 naming both."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import numpy as np
import pytest
from kserve import InferenceRESTClient, InferInput, InferRequest, InferResponse, RESTConfig

from tsbatch.kinds.image.workload import answer_problems as image_problems
from tsbatch.kinds.image.workload import image_pool
from tsbatch.kinds.text.workload import answer_problems as text_problems
from tsbatch.server.process import TorchServe

T = TypeVar("T")


@dataclass(frozen=True)
class Served:
    """A served model, what the tests send it, and how an answer of it is checked."""

    name: str
    input_name: str
    values: list[bytes]
    as_text: Callable[[bytes], str]  # one input as a JSON body carries it
    problems: Callable[[Any, str], list[str]]  # (answer, model name)
    error_type: str


IMAGES = [payload.body for payload in image_pool(seed=7, sides=(48, 224))][:2]
MODELS = {
    "resnet18": Served(
        "resnet18",
        "image",
        IMAGES,
        lambda raw: base64.b64encode(raw).decode(),
        image_problems,
        "invalid_image",
    ),
    "bert_intent": Served(
        "bert_intent",
        "text",
        [b"freeze my card", "café près d'ici".encode()],
        bytes.decode,
        text_problems,
        "invalid_text",
    ),
}


def sdk(protocol: str, call: Callable[[InferenceRESTClient], Awaitable[T]]) -> T:
    """One SDK call on a client of its own, closed afterwards."""

    async def run() -> T:
        client = InferenceRESTClient(RESTConfig(protocol=protocol, timeout=120))
        try:
            return await call(client)
        finally:
            await client.close()

    return asyncio.run(run())


def token(server: TorchServe) -> dict[str, str]:
    """A fresh headers dict per call: the SDK writes the binary header length into the
    dict it is given."""
    return server.client.headers("inference")


def check_answers(model: Served, answers: list[Any]) -> None:
    """Every input but the last (an empty one) answered; the last its own error."""
    assert len(answers) == len(model.values) + 1
    for answer in answers[:-1]:
        assert model.problems(answer, model.name) == []
    assert answers[-1]["error"]["type"] == model.error_type


def v2_answers(response: InferResponse) -> list[Any]:
    (output,) = response.outputs
    assert (output.name, output.datatype) == ("predictions", "BYTES")
    return [json.loads(item) for item in output.data]


def test_server_liveness_and_readiness(torchserve: TorchServe) -> None:
    base = torchserve.url("inference")
    assert sdk("v2", lambda c: c.is_server_live(base, headers=token(torchserve))) is True
    assert sdk("v2", lambda c: c.is_server_ready(base, headers=token(torchserve))) is True
    # v1 liveness is a GET of the base URL: TorchServe keeps GET / for itself, the plugin
    # answers KServe's liveness body at /v1.
    assert sdk("v1", lambda c: c.is_server_live(f"{base}/v1", headers=token(torchserve))) is True
    with pytest.raises(httpx.HTTPStatusError, match="405"):
        sdk("v1", lambda c: c.is_server_live(base, headers=token(torchserve)))


@pytest.mark.parametrize("protocol", ["v1", "v2"])
def test_model_readiness(torchserve: TorchServe, protocol: str) -> None:
    base = torchserve.url("inference")
    for name in MODELS:
        assert sdk(protocol, lambda c, m=name: c.is_model_ready(base, m, headers=token(torchserve))) is True
    if protocol == "v2":
        assert sdk(protocol, lambda c: c.is_model_ready(base, "nope", headers=token(torchserve))) is False
    else:
        with pytest.raises(httpx.HTTPStatusError, match=r"model 'nope' is not served.*404"):
            sdk(protocol, lambda c: c.is_model_ready(base, "nope", headers=token(torchserve)))


@pytest.mark.parametrize("name", MODELS)
def test_v1_predict(torchserve: TorchServe, name: str) -> None:
    model = MODELS[name]
    instances = [model.as_text(value) for value in model.values] + [""]
    answer = sdk(
        "v1",
        lambda c: c.infer(
            torchserve.url("inference"), {"instances": instances}, model_name=name, headers=token(torchserve)
        ),
    )
    check_answers(model, answer["predictions"])


@pytest.mark.parametrize("name", MODELS)
def test_v2_infer_in_json(torchserve: TorchServe, name: str) -> None:
    model = MODELS[name]
    data = [model.as_text(value) for value in model.values] + [""]
    tensor = InferInput(model.input_name, [len(data)], "BYTES", data=data)
    request = InferRequest(model_name=name, infer_inputs=[tensor], request_id="sdk-json")
    response = sdk(
        "v2",
        lambda c: c.infer(torchserve.url("inference"), request, model_name=name, headers=token(torchserve)),
    )
    assert isinstance(response, InferResponse)
    assert (response.id, response.model_name) == ("sdk-json", name)
    check_answers(model, v2_answers(response))


@pytest.mark.parametrize("name", MODELS)
def test_v2_infer_in_binary_tensors(torchserve: TorchServe, name: str) -> None:
    """Raw image bytes and UTF-8 text in the binary extension, the answer back in it."""
    model = MODELS[name]
    tensor = InferInput(model.input_name, [len(model.values) + 1], "BYTES")
    tensor.set_data_from_numpy(np.array([*model.values, b""], dtype=np.object_), binary_data=True)
    request = InferRequest(
        model_name=name,
        infer_inputs=[tensor],
        request_id="sdk-binary",
        parameters={"binary_data_output": True},
    )
    headers: dict[str, str] = {}
    response = sdk(
        "v2",
        lambda c: c.infer(
            torchserve.url("inference"),
            request,
            model_name=name,
            headers=token(torchserve),
            response_headers=headers,
        ),
    )
    assert int(headers["inference-header-content-length"]) > 0
    assert headers["content-type"] == "application/octet-stream"
    assert response.id == "sdk-binary"
    check_answers(model, v2_answers(response))


def test_a_v2_body_naming_another_model_is_a_400_naming_both(torchserve: TorchServe) -> None:
    model = MODELS["bert_intent"]
    tensor = InferInput(model.input_name, [1], "BYTES", data=["freeze my card"])
    request = InferRequest(model_name="resnet18", infer_inputs=[tensor])
    with pytest.raises(httpx.HTTPStatusError) as raised:
        sdk(
            "v2",
            lambda c: c.infer(
                torchserve.url("inference"), request, model_name=model.name, headers=token(torchserve)
            ),
        )
    assert raised.value.response.status_code == 400
    assert "the body names model 'resnet18'" in str(raised.value)
    assert "the path names 'bert_intent'" in str(raised.value)
