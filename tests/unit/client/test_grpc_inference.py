"""The gRPC messages built from field definitions (tsbatch/client/grpc_inference.py): exact wire bytes."""

from __future__ import annotations

from tsbatch.client.grpc_inference import (
    PREDICTIONS_METHOD,
    GrpcAnswer,
    PredictionResponse,
    PredictionsRequest,
)


def test_a_request_serializes_to_torchserve_field_numbers() -> None:
    request = PredictionsRequest(model_name="m", model_version="1", input={"data": b"x"}, sequence_id="s")
    entry = b"\x0a\x04data" + b"\x12\x01x"  # map entry: key = 1 (string), value = 2 (bytes)
    expected = b"\x0a\x01m" + b"\x12\x011" + b"\x1a" + bytes([len(entry)]) + entry + b"\x22\x01s"
    assert request.SerializeToString() == expected
    assert PREDICTIONS_METHOD == "/org.pytorch.serve.grpc.inference.InferenceAPIsService/Predictions"


def test_a_response_reads_prediction_from_field_one_and_errors_from_the_body() -> None:
    payload = b'{"error": {"type": "x"}}'
    assert PredictionResponse.FromString(b"\x0a" + bytes([len(payload)]) + payload).prediction == payload
    assert GrpcAnswer({"error": {"type": "invalid_image"}}).error == {"type": "invalid_image"}
    assert GrpcAnswer({"model": "m"}).error is None
