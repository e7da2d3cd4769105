"""Which envelope a request came in, the inputs inside it, and the response in the same kind.

Clients pack inputs four ways: one input per request (raw bytes or text, ``{"image": ...}``,
``{"text": ...}``: answered exactly as before), several in our schema (``{"images": [...]}``,
``{"texts": [...]}``, a JSON list, or several multipart fields), KServe v1
(``{"instances": [...]}``) and KServe v2 / Open Inference Protocol (``{"inputs": [{"name",
"datatype": "BYTES", "shape", "data": [...]}]}``, or the same with its tensors in binary
after the JSON: ``binary_tensors``). Parsing turns each into a list of single-input bodies
the model's ``decode`` already reads; an input that cannot be one becomes its own error
and leaves its request-mates alone. Errors stay values (``errors.RequestError``) from here
to the response, whose protocol alone decides the shape of their body (``error_body``).
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Callable, Sequence
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
from batchkit.errors import (
    InvalidInput,
    PayloadTooLarge,
    RequestError,
    error_for_exception,
    inputs_rejected,
)
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
    """One request's protocol and inputs: each a body for ``decode``, or that input's error;
    or, when its envelope could not be read, the request's error and no inputs."""

    protocol: Protocol
    inputs: list[Any]
    error: RequestError | None = None
    tensor_name: str = ""  # KServe v2: the input tensor's name
    request_id: str | None = None  # KServe v2: echoed in the response
    binary_output: bool = False  # KServe v2: the output goes back in the binary extension


def v2_metadata(schema: InputSchema) -> dict[str, Any]:
    """The model's inputs and outputs as GET /v2/models/<m> reports them: one BYTES input
    named after the model's single-input key, and the BYTES output of JSON answers. The
    build writes it into the archive (``oip_metadata.json``) for the frontend plugin.

    The input is a batch of one-element items, ``[-1, 1]``, as Triton reports a batching
    model's ``dims: [1]``: perf_analyzer sends ``[batch] + shape after the batch dimension``
    and cannot send an item of no dimensions. A flat ``[n]`` is taken as well (any shape
    whose product is the number of elements); the answer is ``[n]``."""
    return {
        "platform": "pytorch",
        "inputs": [{"name": schema.single_key, "datatype": "BYTES", "shape": [-1, 1]}],
        "outputs": [{"name": V2_OUTPUT_NAME, "datatype": "BYTES", "shape": [-1]}],
    }


def parse_request(
    request: Any, schema: InputSchema, max_inputs: int, model_name: str, header_length: str | None = None
) -> ParsedRequest:
    """TorchServe's parameters of one request to its protocol and inputs.

    ``header_length`` is the request's Inference-Header-Content-Length header: the body
    is then a binary KServe v2 body; ``model_name`` is the model in the path, which a v2
    body may name too. Never raises: a request whose envelope is wrong (no body, a
    malformed KServe document or binary body, more than ``max_inputs`` inputs: 413) comes
    back with its error and no inputs, in the protocol it was read as that far.
    """
    if isinstance(request, dict):
        if not request:
            return ParsedRequest(Protocol.SINGLE, [], error=schema.error.error(FORM_ENCODED_MESSAGE))
        if len(request) > 1:  # several multipart fields (or gRPC map entries)
            fields = list(request.values())
            return _read(Protocol.LIST, lambda: ParsedRequest(Protocol.LIST, fields), max_inputs, schema)
        body = next(iter(request.values()))
    else:
        body = request
    if header_length is not None and not isinstance(body, dict):
        return _read(
            Protocol.KSERVE_V2,
            lambda: _binary_v2(body, header_length, schema, model_name),
            max_inputs,
            schema,
        )
    if isinstance(body, list):  # a JSON list (sent as application/json)
        return _read(Protocol.LIST, lambda: _listed(Protocol.LIST, body, schema), max_inputs, schema)
    try:
        document = parse_json_object(body, schema.error)
    except Exception as exc:
        return ParsedRequest(Protocol.SINGLE, [], error=error_for_exception(exc))
    if document is None:
        return ParsedRequest(Protocol.SINGLE, [body])
    if "instances" in document:
        return _read(
            Protocol.KSERVE_V1,
            lambda: _listed(Protocol.KSERVE_V1, _only_key(document, "instances", schema), schema),
            max_inputs,
            schema,
        )
    if "inputs" in document:
        return _read(Protocol.KSERVE_V2, lambda: _kserve_v2(document, schema, model_name), max_inputs, schema)
    if schema.list_key in document:
        return _read(
            Protocol.LIST,
            lambda: _listed(Protocol.LIST, _only_key(document, schema.list_key, schema), schema),
            max_inputs,
            schema,
        )
    return ParsedRequest(Protocol.SINGLE, [document])


def _read(
    protocol: Protocol, read: Callable[[], ParsedRequest], max_inputs: int, schema: InputSchema
) -> ParsedRequest:
    """The request as ``read`` parses it, its inputs counted; when a check raises, its
    error, to be answered in ``protocol``."""
    try:
        parsed = read()
        count = len(parsed.inputs)
        if count == 0:
            raise schema.error("the request holds no inputs (an empty list)")
        if count > max_inputs:
            raise PayloadTooLarge(
                f"the request holds {count} inputs; the limit is {max_inputs} per request "
                "(split it into several requests)"
            )
    except Exception as exc:
        return ParsedRequest(protocol, [], error=error_for_exception(exc))
    return parsed


def _only_key(document: dict[str, Any], key: str, schema: InputSchema) -> list[Any]:
    extra = sorted(set(document) - {key})
    if extra:
        raise schema.error(f'unexpected keys {extra} beside "{key}"')
    value = document[key]
    if not isinstance(value, list):
        raise schema.error(f'"{key}" must be a list, got {type(value).__name__}')
    return value


def _listed(protocol: Protocol, values: Sequence[Any], schema: InputSchema) -> ParsedRequest:
    return ParsedRequest(
        protocol, [_element_body(value, index, schema) for index, value in enumerate(values)]
    )


def _element_body(value: Any, index: int, schema: InputSchema) -> Any:
    """One listed input to the single-input body ``decode`` reads, or that input's error."""
    key = schema.single_key
    if isinstance(value, str):
        return {key: value}
    if isinstance(value, dict) and len(value) == 1:
        ((name, inner),) = value.items()
        if name in (key, *V1_INSTANCE_KEYS):
            return {key: inner}
    return schema.error.error(
        f'input {index} must be a string or {{"{key}": "..."}}, got {json.dumps(value)[:80]}'
    )


def _binary_v2(body: Any, header_length: str, schema: InputSchema, model_name: str) -> ParsedRequest:
    """A binary v2 body: its JSON header, and the tensors after it."""
    raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    document, tensors = split_body(raw, header_length, schema.error)
    if "inputs" not in document:
        raise schema.error('the JSON header of a binary body must be a KServe v2 {"inputs": [...]}')
    return _kserve_v2(document, schema, model_name, tensors)


def _kserve_v2(
    document: dict[str, Any], schema: InputSchema, model_name: str, tensors: bytes = b""
) -> ParsedRequest:
    """A v2 document (with ``tensors``, the bytes after a binary body's JSON header).

    Top-level keys other than the protocol's own are ignored, as the protocol allows;
    ``model_name`` (which the KServe SDK sends) must name the model in the path."""
    named = document.get("model_name")
    if named is not None and named != model_name:
        raise schema.error(
            f'the body names model {named!r} ("model_name") but the path names {model_name!r}: '
            "send the request to the model it names, or drop model_name"
        )
    inputs = document["inputs"]
    if not isinstance(inputs, list) or len(inputs) != 1 or not isinstance(inputs[0], dict):
        raise schema.error(
            f'a KServe v2 body\'s "inputs" must be a list of one tensor, got {json.dumps(inputs)[:80]}'
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


@dataclass(frozen=True)
class ErrorReply:
    """A request answered with an error: the error (its status) and the body rendered in
    the request's protocol."""

    error: RequestError
    body: dict[str, Any]


def error_body(error: RequestError, protocol: Protocol) -> dict[str, Any]:
    """A request's error body: the Open Inference Protocol's shape on v2, whose clients
    read "error" as the message string (tritonclient fails on anything else); ours else."""
    if protocol is Protocol.KSERVE_V2:
        return {"error": error.message, "type": error.code}
    return input_error_body(error)


def input_error_body(error: RequestError) -> dict[str, Any]:
    """One input's error in a response that lists every input's answer, in any protocol."""
    return {"error": {"type": error.code, "message": error.message}}


def compose_response(parsed: ParsedRequest, results: Sequence[Any], model_name: str) -> Any:
    """The request's response in its own protocol (a BinaryBody when a v2 request asked for
    binary output); an ErrorReply, in JSON, when its envelope or every input failed."""
    if parsed.error is not None:
        return ErrorReply(parsed.error, error_body(parsed.error, parsed.protocol))
    if parsed.protocol is Protocol.SINGLE:
        (result,) = results
        if isinstance(result, RequestError):
            return ErrorReply(result, error_body(result, parsed.protocol))
        return result
    items = [input_error_body(result) if isinstance(result, RequestError) else result for result in results]
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
        rejected = inputs_rejected(errors[0], len(results))
        return ErrorReply(rejected, {**error_body(rejected, parsed.protocol), **body})
    if parsed.binary_output:
        return _as_binary(body)
    return body


def _as_binary(body: dict[str, Any]) -> BinaryBody:
    """A JSON v2 response with its output moved into the binary extension."""
    (output,) = body["outputs"]
    tensor = encode_elements([item.encode("utf-8") for item in output.pop("data")])
    output["parameters"] = {"binary_data_size": len(tensor)}
    return binary_body(body, [tensor])
