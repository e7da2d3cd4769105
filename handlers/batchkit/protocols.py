"""Which envelope a request came in, the inputs inside it, and the response in the same kind.

Clients pack inputs four ways: one input per request (raw bytes or text, ``{"image": ...}``,
``{"text": ...}``: answered exactly as before), several in our schema (``{"images": [...]}``,
``{"texts": [...]}``, a JSON list, or several multipart fields), KServe v1
(``{"instances": [...]}``) and KServe v2 / Open Inference Protocol (``{"inputs": [{"name",
"datatype": "BYTES", "shape", "data": [...]}]}``). Parsing turns each into a list of
single-input bodies the model's ``decode`` already reads; an input that cannot be one
becomes its own error and leaves its request-mates alone.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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


def parse_request(request: Any, schema: InputSchema, max_inputs: int) -> ParsedRequest:
    """TorchServe's parameters of one request to its protocol and inputs.

    Raises a RequestError for the whole request when its envelope is wrong (no body, a
    malformed KServe document, more than ``max_inputs`` inputs: 413).
    """
    if isinstance(request, dict):
        if not request:
            raise schema.error(FORM_ENCODED_MESSAGE)
        if len(request) > 1:  # several multipart fields (or gRPC map entries)
            return _counted(ParsedRequest(Protocol.LIST, list(request.values())), max_inputs, schema)
        body = next(iter(request.values()))
    else:
        body = request
    if isinstance(body, list):  # a JSON list (sent as application/json)
        return _counted(ParsedRequest(Protocol.LIST, _elements(body, schema)), max_inputs, schema)
    document = parse_json_object(body, schema.error)
    if document is None:
        return ParsedRequest(Protocol.SINGLE, [body])
    if "instances" in document:
        instances = _only_key(document, "instances", schema)
        return _counted(ParsedRequest(Protocol.KSERVE_V1, _elements(instances, schema)), max_inputs, schema)
    if "inputs" in document:
        return _counted(_kserve_v2(document, schema), max_inputs, schema)
    if schema.list_key in document:
        items = _only_key(document, schema.list_key, schema)
        return _counted(ParsedRequest(Protocol.LIST, _elements(items, schema)), max_inputs, schema)
    return ParsedRequest(Protocol.SINGLE, [document])


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


def _kserve_v2(document: dict[str, Any], schema: InputSchema) -> ParsedRequest:
    extra = sorted(set(document) - {"inputs", "id", "parameters", "outputs"})
    tensors = document["inputs"]
    if extra or not isinstance(tensors, list) or len(tensors) != 1 or not isinstance(tensors[0], dict):
        raise schema.error(
            'a KServe v2 body must be {"inputs": [one tensor]} (with optional "id", "parameters")'
        )
    tensor = tensors[0]
    if tensor.get("datatype") != "BYTES":
        raise schema.error(f'the input tensor\'s datatype must be "BYTES", got {tensor.get("datatype")!r}')
    data = tensor.get("data")
    if not isinstance(data, list):
        raise schema.error('the input tensor needs "data": a list of strings')
    shape = tensor.get("shape")
    if (
        not isinstance(shape, list)
        or not all(isinstance(n, int) for n in shape)
        or math.prod(shape) != len(data)
    ):
        raise schema.error(
            f'the input tensor\'s "shape" must be a list of sizes whose product is {len(data)}'
        )
    request_id = document.get("id")
    return ParsedRequest(
        Protocol.KSERVE_V2,
        _elements(data, schema),
        tensor_name=str(tensor.get("name", "")),
        request_id=str(request_id) if request_id is not None else None,
    )


def compose_response(parsed: ParsedRequest, results: Sequence[Any], model_name: str) -> Any:
    """The request's response in its own protocol; a RequestError when no input succeeded."""
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
        return InputsRejected(int(errors[0].status), body, len(results))
    return body
