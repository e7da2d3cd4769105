"""The TorchServe adapter: config, labels, statuses and reports, on a model-free handler."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from batchkit.binary_tensors import bytes_elements, encode_elements
from batchkit.config import ModelConfig
from batchkit.errors import InvalidInput
from batchkit.handler_base import BatchHandler
from batchkit.metrics import BatchReport
from batchkit.protocols import InputSchema


class DoublingHandler(BatchHandler[ModelConfig]):
    """Numbers in, doubled numbers out: the pipeline without a model."""

    config_type = ModelConfig
    input_schema = InputSchema(single_key="number", list_key="numbers", error=InvalidInput)

    def load(self) -> None:
        self.loaded_labels = list(self.labels)

    def decode(self, body: Any) -> int:
        if not isinstance(body, int):
            raise InvalidInput("not a number")
        return body

    def infer(self, items: list[int]) -> list[int]:
        return [2 * item for item in items]

    def encode(self, output: int) -> dict[str, Any]:
        return {"value": output, "label": self.labels[output % len(self.labels)]}

    def warmup_items(self, count: int) -> list[int]:
        return list(range(count))


class BrokenReportHandler(DoublingHandler):
    def annotate(self, report: BatchReport, outputs: list[Any]) -> None:
        raise RuntimeError("report failed")


@pytest.fixture
def model_dir(tmp_path: Path) -> tuple[Path, dict]:
    (tmp_path / "labels.json").write_text(json.dumps(["even", "odd", "other"]))
    handler = {"model_name": "doubler", "model_file": "none.pt", "labels_file": "labels.json", "top_k": 9}
    return tmp_path, {"batchSize": 4, "handler": handler}


def started(handler: DoublingHandler, model_dir: tuple[Path, dict], fake_context_factory) -> Any:
    context = fake_context_factory(*model_dir)
    handler.initialize(context)
    return context


def test_labels_are_loaded_before_the_model_and_top_k_is_capped(model_dir, fake_context_factory) -> None:
    handler = DoublingHandler()
    started(handler, model_dir, fake_context_factory)
    assert handler.initialized and handler.loaded_labels == ["even", "odd", "other"]
    assert handler.top_k == 3 and handler.model_name == "doubler" and handler.max_batch_size == 4


def test_errors_get_their_status_and_every_response_is_json(model_dir, fake_context_factory) -> None:
    handler = DoublingHandler()
    context = started(handler, model_dir, fake_context_factory)
    responses = handler.handle([{"body": 1}, {"body": "x"}, {"data": 2}], context)
    assert responses[0] == {"value": 2, "label": "other"} and responses[2] == {"value": 4, "label": "odd"}
    assert responses[1] == {"error": {"type": "invalid_input", "message": "not a number"}}
    assert context.statuses == {1: (400, "Bad Request")}
    assert context.content_types == dict.fromkeys(range(3), "application/json")
    report = handler.last_report
    assert (report.batch_size, report.rejected_requests, report.padding) == (3, 1, None)


def test_a_failure_outside_the_pipeline_fails_the_batch_not_the_worker(
    model_dir, fake_context_factory
) -> None:
    handler = BrokenReportHandler()
    context = started(handler, model_dir, fake_context_factory)
    responses = handler.handle([{"body": 1}, {"body": 2}], context)
    assert [context.status(i) for i in range(2)] == [500, 500]
    assert responses[0]["error"] == {"type": "inference_failed", "message": "RuntimeError: report failed"}
    assert handler.last_report.batch_size == 2


def test_a_config_without_a_handler_section_is_refused(model_dir, fake_context_factory) -> None:
    directory, _ = model_dir
    with pytest.raises(ValueError, match="no handler section"):
        DoublingHandler().initialize(fake_context_factory(directory, {"batchSize": 4}))


class ByteCountHandler(DoublingHandler):
    """Bodies in, their doubled byte count out: a model that reads raw bytes."""

    def decode(self, body: Any) -> int:
        if not isinstance(body, bytes) or not body:
            raise InvalidInput("not bytes")
        return len(body)


def test_a_binary_v2_request_gets_bytes_and_its_header_length_beside_json_mates(
    model_dir, fake_context_factory
) -> None:
    handler = ByteCountHandler()
    context = started(handler, model_dir, fake_context_factory)
    tensor = encode_elements([b"abc", b""])
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "n",
                    "datatype": "BYTES",
                    "shape": [2],
                    "parameters": {"binary_data_size": len(tensor)},
                }
            ],
            "parameters": {"binary_data_output": True},
        }
    ).encode()
    context.request_headers = {
        0: {"Inference-Header-Content-Length": str(len(header))},
        2: {"inference-header-content-length": "9999"},
    }
    responses = handler.handle(
        [{"body": header + tensor}, {"body": b"xy"}, {"body": header + tensor}], context
    )
    length = int(context.response_headers[0]["Inference-Header-Content-Length"])
    answer = json.loads(responses[0][:length])
    elements = bytes_elements(responses[0][length:], 2, "predictions", InvalidInput)
    assert answer["outputs"][0]["parameters"]["binary_data_size"] == len(responses[0]) - length
    assert [json.loads(element) for element in elements] == [
        {"value": 6, "label": "even"},
        {"error": {"type": "invalid_input", "message": "not bytes"}},
    ]
    assert context.content_types == {
        0: "application/octet-stream",
        1: "application/json",
        2: "application/json",
    }
    assert responses[1] == {"value": 4, "label": "odd"}
    assert context.statuses == {2: (400, "Bad Request")}
    assert "Inference-Header-Content-Length is 9999" in responses[2]["error"]


def test_a_v2_body_naming_another_model_fails_alone_in_the_protocol_shape(
    model_dir, fake_context_factory
) -> None:
    handler = DoublingHandler()
    context = started(handler, model_dir, fake_context_factory)
    tensor = {"name": "n", "datatype": "BYTES", "shape": [1], "data": ['{"number": 3}']}
    named = [{"body": {"model_name": name, "id": "a", "inputs": [tensor]}} for name in ("doubler", "other")]
    responses = handler.handle([*named, {"body": 5}], context)
    # Naming its own model, the request gets past its envelope to decode (which wants a number).
    assert json.loads(responses[0]["outputs"][0]["data"][0])["error"]["message"] == "not a number"
    assert responses[1] == {
        "error": "the body names model 'other' (\"model_name\") but the path names 'doubler': "
        "send the request to the model it names, or drop model_name",
        "type": "invalid_input",
    }
    assert responses[2] == {"value": 10, "label": "odd"}
    assert context.statuses == {0: (400, "Bad Request"), 1: (400, "Bad Request")}


def test_a_late_request_is_answered_503_before_decode_and_its_batch_mates_run(
    model_dir, fake_context_factory
) -> None:
    """Expired, on time and no deadline in one batch: only the expired one is shed, never
    decoded (its body is not even a number), with Retry-After and the shed counted."""
    handler = DoublingHandler()
    context = started(handler, model_dir, fake_context_factory)
    now_ms = time.time() * 1000
    context.request_headers = {
        0: {"X-Request-Deadline-Ms": str(now_ms - 1000)},
        1: {"x-request-deadline-ms": str(now_ms + 60_000)},
    }
    bodies = handler.handle([{"body": "not a number"}, {"body": 3}, {"body": 4}], context)
    assert [context.status(i) for i in range(3)] == [503, 200, 200]
    assert bodies[0]["error"]["type"] == "deadline_exceeded" and "passed" in bodies[0]["error"]["message"]
    assert context.response_headers[0]["Retry-After"] == "1"
    assert [body["value"] for body in bodies[1:]] == [6, 8]
    report = handler.last_report
    assert report is not None and (report.shed_requests, report.rejected_requests, report.inputs) == (1, 1, 2)
    assert handler.deadlines.batches_seen == 1, "the batch that ran teaches the policy its time"
