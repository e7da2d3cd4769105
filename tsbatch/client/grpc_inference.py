"""TorchServe's gRPC inference API (``grpc_inference_port``) from Python, without its .proto.

The two messages the ``Predictions`` call needs are declared here from the interface's
published field definitions (package ``org.pytorch.serve.grpc.inference``) and built at
import time, so no code generation step is needed. TorchServe 0.12 answers a request the
handler rejected with gRPC status OK and the error JSON in ``prediction``: callers must
read the body, as :meth:`GrpcInference.predict` does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "org.pytorch.serve.grpc.inference"
PREDICTIONS_METHOD = f"/{PACKAGE}.InferenceAPIsService/Predictions"

Field = descriptor_pb2.FieldDescriptorProto


def _file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    """PredictionsRequest {model_name=1, model_version=2, input=3 map<string, bytes>,
    sequence_id=4} and PredictionResponse {prediction=1 bytes}."""
    file = descriptor_pb2.FileDescriptorProto(
        name="tsbatch_inference.proto", package=PACKAGE, syntax="proto3"
    )
    request = file.message_type.add(name="PredictionsRequest")
    request.field.add(name="model_name", number=1, type=Field.TYPE_STRING, label=Field.LABEL_OPTIONAL)
    request.field.add(name="model_version", number=2, type=Field.TYPE_STRING, label=Field.LABEL_OPTIONAL)
    request.field.add(
        name="input",
        number=3,
        type=Field.TYPE_MESSAGE,
        label=Field.LABEL_REPEATED,
        type_name=f".{PACKAGE}.PredictionsRequest.InputEntry",
    )
    request.field.add(name="sequence_id", number=4, type=Field.TYPE_STRING, label=Field.LABEL_OPTIONAL)
    entry = request.nested_type.add(name="InputEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=Field.TYPE_STRING, label=Field.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=Field.TYPE_BYTES, label=Field.LABEL_OPTIONAL)
    response = file.message_type.add(name="PredictionResponse")
    response.field.add(name="prediction", number=1, type=Field.TYPE_BYTES, label=Field.LABEL_OPTIONAL)
    return file


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file_descriptor())
PredictionsRequest = message_factory.GetMessageClass(
    _POOL.FindMessageTypeByName(f"{PACKAGE}.PredictionsRequest")
)
PredictionResponse = message_factory.GetMessageClass(
    _POOL.FindMessageTypeByName(f"{PACKAGE}.PredictionResponse")
)


@dataclass(frozen=True)
class GrpcAnswer:
    """The JSON body of one prediction; ``error`` is set when the handler rejected it."""

    body: Any

    @property
    def error(self) -> dict[str, Any] | None:
        return self.body.get("error") if isinstance(self.body, dict) else None


class GrpcInference:
    """One channel to a TorchServe gRPC inference port, with its inference token."""

    def __init__(self, address: str, token: str | None) -> None:
        self.channel = grpc.insecure_channel(address)
        self.metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._call = self.channel.unary_unary(
            PREDICTIONS_METHOD,
            request_serializer=lambda message: message.SerializeToString(),
            response_deserializer=PredictionResponse.FromString,
        )

    def predict(self, model: str, inputs: dict[str, bytes], timeout: float = 60) -> GrpcAnswer:
        """Send ``inputs`` (the handler sees them as the request's fields) to ``model``."""
        request = PredictionsRequest(model_name=model, input=inputs)
        response = self._call(request, metadata=self.metadata, timeout=timeout)
        return GrpcAnswer(json.loads(response.prediction))

    def close(self) -> None:
        self.channel.close()
