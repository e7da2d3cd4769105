"""Which envelope a request came in, the inputs inside it, and the response in the same kind.

Clients pack inputs four ways: one input per request (raw bytes or text, ``{"image": ...}``,
``{"text": ...}``: answered exactly as before), several in our schema (``{"images": [...]}``,
``{"texts": [...]}``, a JSON list, or several multipart fields), KServe v1
(``{"instances": [...]}``) and KServe v2 / Open Inference Protocol (``{"inputs": [{"name",
"datatype": "BYTES", "shape", "data": [...]}]}``, or the same with its tensors in binary
after the JSON: ``binary_tensors``). Parsing turns each into a list of single-input bodies
the model's ``decode`` already reads; an input that cannot be one becomes its own error
and leaves its request-mates alone.
"""

from __future__ import annotations

import contextlib
import enum
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from batchkit.binary_tensors import (
    BinaryBody,
    binary_body,
    binary_data_size,
    bytes_elements,
    encode_elements,
    split_body,
    take_tensor,
)
from batchkit.errors import InputsRejected, InvalidInput, PayloadTooLarge, RequestError
from batchkit.payloads import parse_json_object

V1_INSTANCE_KEYS = ("data", "b64")
V2_OUTPUT_NAME = "predictions"
FORM_ENCODED_MESSAGE = (
    "no body reached the model: TorchServe decodes a body sent as "
    "application/x-www-form-urlencoded (curl's default for -d/--data-binary without a "
    "Content-Type) as a form and drops it. Send the header that says what the body is, "
    "e.g. -H 'Content-Type: application/octet-stream' (or upload with curl -T FILE)"
)


class Protocol(enum.Enum):
    SINGLE = "single"
    LIST = "list"
    KSERVE_V1 = "kserve_v1"
    KSERVE_V2 = "kserve_v2"


@dataclass(frozen=True)
class InputSchema:
    """How a model names its input in JSON bodies: one (``image``) and several (``images``)."""

    single_key: str
    list_key: str
    error: type[InvalidInput]


@dataclass(frozen=True)
class ParsedRequest:
    """One request's protocol and inputs: each a body for ``decode``, or that input's error."""

    protocol: Protocol
    inputs: list[Any]
    tensor_name: str = ""  # KServe v2: the input tensor's name
    request_id: str | None = None  # KServe v2: echoed in the response
    binary_output: bool = False  # KServe v2: the output goes back in the binary extension


def v2_metadata(schema: InputSchema) -> dict[str, Any]:
    """The model's inputs and outputs as GET /v2/models/<m> reports them: one BYTES input
    named after the model's single-input key, and the BYTES output of JSON answers. The
    build writes it into the archive (``oip_metadata.json``) for the frontend plugin."""
    return {
        "platform": "pytorch",
        "inputs": [{"name": schema.single_key, "datatype": "BYTES", "shape": [-1]}],
        "outputs": [{"name": V2_OUTPUT_NAME, "datatype": "BYTES", "shape": [-1]}],
    }


def parse_request(
    request: Any, schema: InputSchema, max_inputs: int, header_length: str | None = None
) -> ParsedRequest:
    """TorchServe's parameters of one request to its protocol and inputs.

    ``header_length`` is the request's Inference-Header-Content-Length header: the body
    is then a binary KServe v2 body. Raises a RequestError for the whole request when its
    envelope is wrong (no body, a malformed KServe document or binary body, more than
    ``max_inputs`` inputs: 413).
    """
    if isinstance(request, dict):
        if not request:
            raise schema.error(FORM_ENCODED_MESSAGE)
        if len(request) > 1:  # several multipart fields (or gRPC map entries)
            return _counted(ParsedRequest(Protocol.LIST, list(request.values())), max_inputs, schema)
        body = next(iter(request.values()))
    else:
        body = request
    if header_length is not None and not isinstance(body, dict):
        with _open_inference():
            raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
            document, tensors = split_body(raw, header_length, schema.error)
            if "inputs" not in document:
                raise schema.error('the JSON header of a binary body must be a KServe v2 {"inputs": [...]}')
            return _counted(_kserve_v2(document, schema, tensors), max_inputs, schema)
    if isinstance(body, list):  # a JSON list (sent as application/json)
        return _counted(ParsedRequest(Protocol.LIST, _elements(body, schema)), max_inputs, schema)
    document = parse_json_object(body, schema.error)
    if document is None:
        return ParsedRequest(Protocol.SINGLE, [body])
    if "instances" in document:
        instances = _only_key(document, "instances", schema)
        return _counted(ParsedRequest(Protocol.KSERVE_V1, _elements(instances, schema)), max_inputs, schema)
    if "inputs" in document:
        with _open_inference():
            return _counted(_kserve_v2(document, schema), max_inputs, schema)
    if schema.list_key in document:
        items = _only_key(document, schema.list_key, schema)
        return _counted(ParsedRequest(Protocol.LIST, _elements(items, schema)), max_inputs, schema)
    return ParsedRequest(Protocol.SINGLE, [document])


@contextlib.contextmanager
def _open_inference() -> Iterator[None]:
    """Errors raised inside answer in the Open Inference Protocol's error shape."""
    try:
        yield
    except RequestError as exc:
        exc.oip = True
        raise


def _only_key(document: dict[str, Any], key: str, schema: InputSchema) -> list[Any]:
    extra = sorted(set(document) - {key})
    if extra:
        raise schema.error(f'unexpected keys {extra} beside "{key}"')
    value = document[key]
    if not isinstance(value, list):
        raise schema.error(f'"{key}" must be a list, got {type(value).__name__}')
    return value


def _counted(parsed: ParsedRequest, max_inputs: int, schema: InputSchema) -> ParsedRequest:
    count = len(parsed.inputs)
    if count == 0:
        raise schema.error("the request holds no inputs (an empty list)")
    if count > max_inputs:
        raise PayloadTooLarge(
            f"the request holds {count} inputs; the limit is {max_inputs} per request "
            "(split it into several requests)"
        )
    return parsed


def _elements(values: Sequence[Any], schema: InputSchema) -> list[Any]:
    return [_element_body(value, index, schema) for index, value in enumerate(values)]


def _element_body(value: Any, index: int, schema: InputSchema) -> Any:
    """One listed input to the single-input body ``decode`` reads, or that input's error."""
    key = schema.single_key
    if isinstance(value, str):
        return {key: value}
    if isinstance(value, dict) and len(value) == 1:
        ((name, inner),) = value.items()
        if name in (key, *V1_INSTANCE_KEYS):
            return {key: inner}
    return schema.error(f'input {index} must be a string or {{"{key}": "..."}}, got {json.dumps(value)[:80]}')


def _kserve_v2(document: dict[str, Any], schema: InputSchema, tensors: bytes = b"") -> ParsedRequest:
    """A v2 document (with ``tensors``, the bytes after a binary body's JSON header)."""
    extra = sorted(set(document) - {"inputs", "id", "parameters", "outputs"})
    inputs = document["inputs"]
    if extra or not isinstance(inputs, list) or len(inputs) != 1 or not isinstance(inputs[0], dict):
        raise schema.error(
            'a KServe v2 body must be {"inputs": [one tensor]} (with optional "id", "parameters", "outputs")'
        )
    tensor = inputs[0]
    name = str(tensor.get("name", ""))
    if tensor.get("datatype") != "BYTES":
        raise schema.error(f'the input tensor\'s datatype must be "BYTES", got {tensor.get("datatype")!r}')
    shape = tensor.get("shape")
    if not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise schema.error('the input tensor\'s "shape" must be a list of sizes')
    size = binary_data_size(tensor, schema.error)
    if size is not None:
        if "data" in tensor:
            raise schema.error(f'input {name!r} has both "data" and binary_data_size: send one')
        raw = take_tensor(tensors, size, name, schema.error)
        if len(tensors) > size:
            raise schema.error(f"{len(tensors) - size} bytes follow the last input's binary_data_size")
        data: list[Any] = list(bytes_elements(raw, math.prod(shape), name, schema.error))
    else:
        if tensors:
            raise schema.error(
                f"{len(tensors)} bytes follow the JSON header but no input has binary_data_size"
            )
        data = tensor.get("data")
        if not isinstance(data, list):
            raise schema.error('the input tensor needs "data": a list of strings')
        if math.prod(shape) != len(data):
            raise schema.error(
                f'the input tensor\'s "shape" must be a list of sizes whose product is {len(data)}'
            )
    request_id = document.get("id")
    return ParsedRequest(
        Protocol.KSERVE_V2,
        [
            value if isinstance(value, bytes) else _element_body(value, i, schema)
            for i, value in enumerate(data)
        ],
        tensor_name=name,
        request_id=str(request_id) if request_id is not None else None,
        binary_output=_binary_output(document, schema),
    )


def _binary_output(document: dict[str, Any], schema: InputSchema) -> bool:
    """Whether the output goes back binary; a requested output other than ours is a 400."""
    parameters = document.get("parameters") or {}
    binary = bool(parameters.get("binary_data_output", False)) if isinstance(parameters, dict) else False
    requested = document.get("outputs") or []
    if not isinstance(requested, list) or not all(isinstance(o, dict) for o in requested):
        raise schema.error('"outputs" must be a list of {"name": ..., "parameters": {...}}')
    for output in requested:
        if output.get("name") != V2_OUTPUT_NAME:
            raise schema.error(
                f"unknown output {output.get('name')!r}: this model's outputs are [{V2_OUTPUT_NAME!r}]"
            )
        own = output.get("parameters") or {}
        if isinstance(own, dict) and "binary_data" in own:
            binary = bool(own["binary_data"])
    return binary


def compose_response(parsed: ParsedRequest, results: Sequence[Any], model_name: str) -> Any:
    """The request's response in its own protocol (a BinaryBody when a v2 request asked for
    binary output); a RequestError, in JSON, when no input succeeded."""
    if parsed.protocol is Protocol.SINGLE:
        return results[0]
    items = [result.to_body() if isinstance(result, RequestError) else result for result in results]
    if parsed.protocol is Protocol.KSERVE_V1:
        body: dict[str, Any] = {"predictions": items}
    elif parsed.protocol is Protocol.KSERVE_V2:
        body = {"model_name": model_name}
        if parsed.request_id is not None:
            body["id"] = parsed.request_id
        output = {"name": V2_OUTPUT_NAME, "datatype": "BYTES", "shape": [len(items)]}
        body["outputs"] = [{**output, "data": [json.dumps(item) for item in items]}]
    else:
        body = {"results": items}
    errors = [result for result in results if isinstance(result, RequestError)]
    if len(errors) == len(results):
        rejected = InputsRejected(int(errors[0].status), body, len(results))
        rejected.oip = parsed.protocol is Protocol.KSERVE_V2
        return rejected
    if parsed.binary_output:
        return _as_binary(body)
    return body


def _as_binary(body: dict[str, Any]) -> BinaryBody:
    """A JSON v2 response with its output moved into the binary extension."""
    (output,) = body["outputs"]
    tensor = encode_elements([item.encode("utf-8") for item in output.pop("data")])
    output["parameters"] = {"binary_data_size": len(tensor)}
    return binary_body(body, [tensor])
