"""The ResNet handler on a tiny TorchScript model with a fake TorchServe context."""

from __future__ import annotations

import base64
import json
from dataclasses import replace

import pytest
import torch

from image_classifier_handler import ImageClassifierHandler
from tests.conftest import TINY_LABELS, image_bytes


@pytest.fixture
def handler_and_context(tiny_image_model_dir, fake_context_factory):
    model_dir, model_yaml = tiny_image_model_dir
    context = fake_context_factory(model_dir, model_yaml, batch_size=4)
    handler = ImageClassifierHandler()
    handler.initialize(context)
    return handler, context


def request(body: object) -> dict:
    return {"body": body}


def test_mixed_batch_answers_each_request_on_its_own(handler_and_context) -> None:
    handler, context = handler_and_context
    good_png = image_bytes("PNG", color="red")
    good_jpeg = image_bytes("JPEG", color="blue", size=(64, 48))
    data = [
        request(good_png),
        request(b""),
        {"data": {"image": base64.b64encode(good_jpeg).decode()}},
        request(b"not an image at all"),
    ]
    responses = handler.handle(data, context)

    assert len(responses) == 4
    assert [context.status(i) for i in range(4)] == [200, 400, 200, 400]
    assert responses[1]["error"]["type"] == "invalid_image"
    for index in (0, 2):
        body = responses[index]
        assert body["model"] == "tiny"
        probabilities = [p["probability"] for p in body["predictions"]]
        assert len(probabilities) == 2 and probabilities == sorted(probabilities, reverse=True)
        assert all(p["label"] == TINY_LABELS[p["index"]] for p in body["predictions"])
    assert all(context.content_types[i] == "application/json" for i in range(4))


def test_batched_answers_equal_single_answers(handler_and_context) -> None:
    handler, context = handler_and_context
    images = [
        image_bytes("PNG", color=color, size=(30 + 7 * i, 40))
        for i, color in enumerate(["red", "green", "blue", "white"])
    ]
    batched = handler.handle([request(img) for img in images], context)
    singles = [handler.handle([request(img)], context)[0] for img in images]
    for together, alone in zip(batched, singles, strict=True):
        for a, b in zip(together["predictions"], alone["predictions"], strict=True):
            assert a["index"] == b["index"]
            assert a["probability"] == pytest.approx(b["probability"], abs=1e-5)


def test_metrics_are_emitted_per_batch(handler_and_context) -> None:
    handler, context = handler_and_context
    handler.handle([request(image_bytes()), request(b"")], context)
    metrics = context.metrics.metrics
    assert metrics["BatchSize"].values[-1] == (2.0, ["tiny", "Model"])
    assert metrics["BatchFillRatio"].values[-1][0] == pytest.approx(50.0)
    assert metrics["RejectedRequestsTotal"].values[-1][0] == 1.0
    assert metrics["InferenceMs"].values and metrics["PreprocessMs"].values


def test_inference_failure_is_reported_for_the_batch_and_the_handler_keeps_serving(
    handler_and_context,
) -> None:
    handler, context = handler_and_context
    working_model = handler.model

    class Exploding(torch.nn.Module):
        def forward(self, batch: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("CUDA out of memory. Tried to allocate 1.00 GiB")

    handler.model = Exploding()
    failed = handler.handle([request(image_bytes()), request(image_bytes())], context)
    assert [context.status(i) for i in range(2)] == [503, 503]
    assert failed[0]["error"]["type"] == "resource_exhausted"

    handler.model = working_model
    context.statuses.clear()
    recovered = handler.handle([request(image_bytes())], context)
    assert context.status(0) == 200 and recovered[0]["predictions"]


def test_initialize_rejects_a_config_with_unknown_keys(tiny_image_model_dir, fake_context_factory) -> None:
    model_dir, model_yaml = tiny_image_model_dir
    model_yaml["handler"]["resize"] = 3
    with pytest.raises(ValueError, match="unknown keys"):
        ImageClassifierHandler().initialize(fake_context_factory(model_dir, model_yaml))


def test_multi_input_requests_in_every_protocol_answer_each_input_as_if_sent_alone(
    handler_and_context,
) -> None:
    handler, context = handler_and_context
    images = [
        image_bytes("PNG", color=color, size=(30 + 5 * i, 40))
        for i, color in enumerate(["red", "green", "blue", "white", "yellow"])
    ]
    encoded = [base64.b64encode(image).decode() for image in images]
    alone = [handler.handle([request(image)], context)[0] for image in images]
    context.statuses.clear()
    v2_tensor = {"name": "image", "datatype": "BYTES", "shape": [2], "data": [encoded[3], "not base64!"]}
    data = [
        request({"instances": [{"data": encoded[0]}, {"b64": encoded[1]}]}),
        request({"images": ["data:image/png;base64," + encoded[2], "aGk="]}),
        request({"id": "x", "inputs": [v2_tensor]}),
        request(images[4]),
        request({"images": ["", "aGk="]}),
    ]
    responses = handler.handle(data, context)
    assert [context.status(i) for i in range(5)] == [200, 200, 200, 200, 400]
    v1, listed, v2, single, all_bad = responses
    got = [*v1["predictions"], listed["results"][0], json.loads(v2["outputs"][0]["data"][0]), single]
    for answer, expected in zip(got, alone, strict=True):
        assert [p["index"] for p in answer["predictions"]] == [p["index"] for p in expected["predictions"]]
        for a, b in zip(answer["predictions"], expected["predictions"], strict=True):
            assert a["probability"] == pytest.approx(b["probability"], abs=1e-5)
    assert listed["results"][1]["error"]["type"] == "invalid_image"
    assert "not valid base64" in json.loads(v2["outputs"][0]["data"][1])["error"]["message"]
    assert all_bad["error"]["type"] == "all_inputs_rejected" and len(all_bad["results"]) == 2
    report = handler.last_report
    assert (report.batch_size, report.rejected_requests, report.inputs, report.rejected_inputs) == (
        5,
        1,
        9,
        4,
    )
    assert context.metrics.metrics["BatchedInputsTotal"].values[-1][0] == 9.0


def test_a_request_past_the_input_cap_gets_413_alone(handler_and_context) -> None:
    handler, context = handler_and_context
    handler.config = replace(handler.config, max_inputs_per_request=2)
    encoded = base64.b64encode(image_bytes()).decode()
    responses = handler.handle(
        [request({"images": [encoded] * 3}), request({"images": [encoded] * 2})], context
    )
    assert [context.status(i) for i in range(2)] == [413, 200]
    assert "the limit is 2 per request" in responses[0]["error"]["message"]
    assert len(responses[1]["results"]) == 2


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a usable GPU")
def test_initialize_fails_when_cuda_is_required_and_missing(
    tiny_image_model_dir, fake_context_factory, monkeypatch
) -> None:
    monkeypatch.setenv("TSBATCH_REQUIRE_CUDA", "1")
    model_dir, model_yaml = tiny_image_model_dir
    handler = ImageClassifierHandler()
    with pytest.raises(
        RuntimeError, match=r"TSBATCH_REQUIRE_CUDA=1 but no usable CUDA: .*; refusing to serve on the CPU"
    ):
        handler.initialize(fake_context_factory(model_dir, model_yaml))
    assert not handler.initialized


def test_initialize_serves_the_compiled_package(tiny_compiled_model_dir, fake_context_factory) -> None:
    model_dir, model_yaml = tiny_compiled_model_dir
    handler = ImageClassifierHandler()
    handler.initialize(fake_context_factory(model_dir, model_yaml))
    assert handler.model.runtime == "aoti"
    (response,) = handler.handle([request(image_bytes())], None)
    assert response["predictions"][0]["label"] in TINY_LABELS
