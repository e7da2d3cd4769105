"""Request envelopes in and responses out (batchkit/protocols.py): our schema, KServe v1 and v2."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from batchkit.binary_tensors import (
    ELEMENT_PREFIX,
    BinaryBody,
    bytes_elements,
    encode_elements,
    header_length_of,
)
from batchkit.errors import PayloadTooLarge, RequestError
from batchkit.protocols import (
    FORM_ENCODED_MESSAGE,
    ErrorReply,
    ParsedRequest,
    Protocol,
    compose_response,
    input_error_body,
    parse_request,
)
from image_serving.errors import InvalidImage
from image_serving.images import IMAGE_INPUTS
from text_serving.errors import InvalidText
from text_serving.text import TEXT_INPUTS


def parse(request: object, schema=IMAGE_INPUTS, max_inputs: int = 8, header_length: str | None = None):
    return parse_request(request, schema, max_inputs, "m", header_length)


def rejection(parsed: ParsedRequest) -> RequestError:
    """The error of a request rejected as a whole, which then holds no inputs."""
    assert parsed.error is not None and parsed.inputs == []
    return parsed.error


def v2_text(**document: object) -> dict[str, object]:
    """A JSON v2 request of two texts, with ``document``'s keys beside its inputs."""
    tensor = {"name": "text", "datatype": "BYTES", "shape": [2], "data": ["a", "b"]}
    return {"body": {"inputs": [tensor], **document}}


@pytest.mark.parametrize(
    "request_",
    [{"body": b"\x89PNG..."}, {"data": b"raw"}, {"file": b"raw"}, {"body": {"image": "aGk="}}, b"raw"],
)
def test_one_input_requests_are_single_and_keep_their_body(request_) -> None:
    parsed = parse(request_)
    assert parsed.protocol is Protocol.SINGLE
    assert len(parsed.inputs) == 1


def test_our_list_schema_in_every_form() -> None:
    assert parse({"body": {"images": ["aGk=", "aGk="]}}).inputs == [{"image": "aGk="}] * 2
    assert parse({"body": ["aGk=", {"image": "aGk="}]}).protocol is Protocol.LIST
    raw = parse({"body": b'{"texts": ["hi", "card lost"]}'}, TEXT_INPUTS)
    assert (raw.protocol, raw.inputs) == (Protocol.LIST, [{"text": "hi"}, {"text": "card lost"}])
    multipart = parse({"first": b"a", "second": b"b"})
    assert (multipart.protocol, multipart.inputs) == (Protocol.LIST, [b"a", b"b"])


def test_kserve_v1_instances_accept_strings_and_data_or_b64_objects() -> None:
    parsed = parse({"body": {"instances": ["aGk=", {"data": "aGk="}, {"b64": "aGk="}, {"other": 1}, 7]}})
    assert parsed.protocol is Protocol.KSERVE_V1
    assert parsed.inputs[:3] == [{"image": "aGk="}] * 3
    assert all(value.code == "invalid_image" for value in parsed.inputs[3:])
    assert "input 4 must be a string" in parsed.inputs[4].message


def test_kserve_v2_bytes_tensor() -> None:
    document = {
        "id": "r1",
        "inputs": [{"name": "text", "datatype": "BYTES", "shape": [2], "data": ["a", "b"]}],
    }
    parsed = parse({"body": document}, TEXT_INPUTS)
    assert parsed.protocol is Protocol.KSERVE_V2
    assert (parsed.inputs, parsed.tensor_name, parsed.request_id) == (
        [{"text": "a"}, {"text": "b"}],
        "text",
        "r1",
    )


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1.0]}]}, "BYTES"),
        ({"inputs": [{"name": "x", "datatype": "BYTES", "shape": [3], "data": ["a"]}]}, "product is 1"),
        ({"inputs": [{"name": "x", "datatype": "BYTES", "shape": [1], "data": "a"}]}, "list of strings"),
        ({"inputs": []}, "must be a list of one tensor, got []"),
        ({"instances": "aGk="}, "must be a list"),
        ({"instances": ["a"], "extra": 1}, "unexpected keys"),
    ],
)
def test_malformed_envelopes_reject_the_request(document: dict, message: str) -> None:
    error = rejection(parse({"body": document}, TEXT_INPUTS))
    assert (error.status, error.code) == (400, "invalid_text")
    assert message in error.message


def test_a_v2_body_may_name_its_model_and_carry_keys_the_protocol_does_not_define() -> None:
    parsed = parse(v2_text(id="1", model_name="m", model_version="2", trace={"span": 7}), TEXT_INPUTS)
    assert (parsed.error, parsed.inputs, parsed.request_id) == (None, [{"text": "a"}, {"text": "b"}], "1")


def test_a_v2_body_naming_another_model_is_a_400_naming_both() -> None:
    parsed = parse(v2_text(model_name="resnet18"), TEXT_INPUTS)
    error = rejection(parsed)
    assert parsed.protocol is Protocol.KSERVE_V2 and error.status == 400
    assert "the body names model 'resnet18' (\"model_name\") but the path names 'm'" in error.message


def test_a_binary_v2_body_naming_another_model_is_a_400_too() -> None:
    request, length = binary_request([b"a"], model_name="bert_intent")
    assert "names model 'bert_intent'" in rejection(parse(request, header_length=length)).message
    named, length = binary_request([b"a"], model_name="m")
    assert parse(named, header_length=length).inputs == [b"a"]


def test_an_empty_list_is_a_400_and_too_many_inputs_a_413() -> None:
    assert "no inputs" in rejection(parse({"body": {"images": []}})).message
    too_many = rejection(parse({"body": {"instances": ["aGk="] * 9}}))
    assert too_many.status == 413 and "9 inputs; the limit is 8" in too_many.message


def test_a_form_encoded_body_that_reached_the_model_as_nothing_says_which_header_to_send() -> None:
    error = rejection(parse({}))
    assert error == InvalidImage.error(FORM_ENCODED_MESSAGE)
    assert "Content-Type: application/octet-stream" in error.message


def test_responses_follow_the_protocol_and_carry_per_input_errors() -> None:
    ok, bad = {"intent": "greet"}, InvalidText.error("text is empty")
    bad_body = {"error": {"type": "invalid_text", "message": "text is empty"}}
    single = parse({"body": "hi"}, TEXT_INPUTS)
    assert compose_response(single, [ok], "m") == ok
    assert compose_response(single, [bad], "m") == ErrorReply(bad, bad_body)
    listed = parse({"body": {"texts": ["hi", " "]}}, TEXT_INPUTS)
    assert compose_response(listed, [ok, bad], "m") == {"results": [ok, bad_body]}
    v1 = parse({"body": {"instances": ["hi", " "]}}, TEXT_INPUTS)
    assert compose_response(v1, [ok, bad], "m") == {"predictions": [ok, bad_body]}
    v2 = parse(
        {
            "body": {
                "id": "7",
                "inputs": [{"name": "t", "datatype": "BYTES", "shape": [2, 1], "data": ["a", "b"]}],
            }
        },
        TEXT_INPUTS,
    )
    body = compose_response(v2, [ok, bad], "m")
    assert (body["model_name"], body["id"]) == ("m", "7")
    (output,) = body["outputs"]
    assert (output["datatype"], output["shape"]) == ("BYTES", [2])
    assert [json.loads(item) for item in output["data"]] == [ok, bad_body]


def test_a_request_whose_inputs_all_fail_takes_the_first_error_status_and_keeps_each_error() -> None:
    listed = parse({"body": {"images": ["a", "b"]}})
    too_big, bad = PayloadTooLarge.error("big"), InvalidImage.error("bad")
    rejected = compose_response(listed, [too_big, bad], "m")
    assert isinstance(rejected, ErrorReply) and rejected.error.status == 413
    assert rejected.body["error"]["type"] == "all_inputs_rejected"
    assert rejected.body["results"] == [input_error_body(too_big), input_error_body(bad)]


def test_many_inputs_may_share_one_error_and_each_renders_alike() -> None:
    shared = InvalidImage.error("bad")
    v1 = parse({"body": {"instances": ["a", "b", "c"]}})
    body = compose_response(v1, [{"ok": 1}, shared, shared], "m")
    assert body == {"predictions": [{"ok": 1}, input_error_body(shared), input_error_body(shared)]}
    assert shared == InvalidImage.error("bad")


def test_a_request_error_renders_in_the_protocol_of_the_request_it_answers() -> None:
    error = InvalidText.error("text is empty")
    ours = compose_response(ParsedRequest(Protocol.LIST, [], error=error), [], "m")
    oip = compose_response(ParsedRequest(Protocol.KSERVE_V2, [], error=error), [], "m")
    assert ours == ErrorReply(error, {"error": {"type": "invalid_text", "message": "text is empty"}})
    assert oip == ErrorReply(error, {"error": "text is empty", "type": "invalid_text"})


# ---- the binary tensor extension -----------------------------------------------------
def binary_request(
    elements: list[bytes], shape: list[int] | None = None, extra: bytes = b"", **header: object
) -> tuple[dict[str, bytes], str]:
    """A body as tritonclient sends it by default, and its Inference-Header-Content-Length."""
    tensor = encode_elements(elements)
    document = {
        "inputs": [
            {
                "name": "image",
                "datatype": "BYTES",
                "shape": shape if shape is not None else [len(elements)],
                "parameters": {"binary_data_size": len(tensor)},
            }
        ],
        **header,
    }
    encoded = json.dumps(document).encode()
    return {"body": encoded + tensor + extra}, str(len(encoded))


def test_a_binary_body_yields_each_bytes_element_as_a_raw_body() -> None:
    request, length = binary_request([b"\x89PNG one", b"", b"\xff\xd8 two"], shape=[3, 1], id="r9")
    parsed = parse(request, header_length=length)
    assert parsed.protocol is Protocol.KSERVE_V2
    assert (parsed.inputs, parsed.tensor_name, parsed.request_id) == (
        [b"\x89PNG one", b"", b"\xff\xd8 two"],
        "image",
        "r9",
    )
    assert parsed.binary_output is False


def test_a_binary_body_decoded_to_text_by_the_worker_still_parses() -> None:
    request, length = binary_request([b"freeze my card"])
    text = request["body"].decode()
    assert parse({"body": text}, TEXT_INPUTS, header_length=length).inputs == [b"freeze my card"]


def test_the_header_name_is_found_whatever_its_case() -> None:
    assert header_length_of({"inference-header-content-length": "12", "body": {}}) == "12"
    assert header_length_of({"Inference-Header-Content-Length": "7"}) == "7"
    assert header_length_of({"content-type": "application/json"}) is None


def rebuilt(header: dict, tensor: bytes) -> tuple[bytes, str]:
    encoded = json.dumps(header).encode()
    return encoded + tensor, str(len(encoded))


def with_size(size: object) -> Callable[[dict, bytes], tuple[bytes, str]]:
    def change(header: dict, tensor: bytes) -> tuple[bytes, str]:
        header["inputs"][0]["parameters"]["binary_data_size"] = size
        return rebuilt(header, tensor)

    return change


def with_tensor(tensor: bytes) -> Callable[[dict, bytes], tuple[bytes, str]]:
    def change(header: dict, _: bytes) -> tuple[bytes, str]:
        header["inputs"][0]["parameters"]["binary_data_size"] = len(tensor)
        return rebuilt(header, tensor)

    return change


def with_input(**changes: object) -> Callable[[dict, bytes], tuple[bytes, str]]:
    def change(header: dict, tensor: bytes) -> tuple[bytes, str]:
        header["inputs"][0].update(changes)
        return rebuilt(header, tensor)

    return change


# Each breaks the two-element body binary_request builds: (header, tensor) -> (body, length).
MALFORMED = {
    "length past the end": (
        lambda h, t: (rebuilt(h, t)[0], "100000"),
        "Inference-Header-Content-Length is 100000 but the body is",
    ),
    "negative length": (lambda h, t: (rebuilt(h, t)[0], "-1"), "Inference-Header-Content-Length is -1"),
    "length not a number": (
        lambda h, t: (rebuilt(h, t)[0], "abc"),
        "must be a whole number of bytes, got 'abc'",
    ),
    "header not JSON": (lambda h, t: (b"not json at all" + t, "15"), "are not a JSON header"),
    "negative size": (with_size(-4), "binary_data_size must be a byte count of 0 or more, got -4"),
    "size past the end": (with_size(999), "has binary_data_size 999 but only"),
    "element past its tensor": (
        with_tensor(encode_elements([b"ab"]) + ELEMENT_PREFIX.pack(50) + b"cd"),
        "element 1 says 50 bytes but only 2 remain",
    ),
    "truncated element length": (
        with_tensor(encode_elements([b"ab"]) + b"\x01\x00"),
        "element 1 has a truncated 4-byte length",
    ),
    "more elements than the shape": (with_input(shape=[1]), "holds more elements than its shape says (1)"),
    "fewer elements than the shape": (with_input(shape=[3]), "holds 2 elements but its shape says 3"),
    "bytes after the last tensor": (
        lambda h, t: rebuilt(h, t + b"xyz"),
        "3 bytes follow the last input's binary_data_size",
    ),
    "data and size": (with_input(data=["ab", "cd"]), 'has both "data" and binary_data_size'),
    "header without inputs": (lambda h, t: rebuilt({"id": "x"}, t), 'must be a KServe v2 {"inputs": [...]}'),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_binary_bodies_are_a_400_naming_the_fault(case: str) -> None:
    request, length = binary_request([b"ab", b"cd"])
    body = request["body"]
    header, tensor = json.loads(body[: int(length)]), body[int(length) :]
    breaks, message = MALFORMED[case]
    broken, broken_length = breaks(header, tensor)
    parsed = parse({"body": broken}, header_length=broken_length)
    error = rejection(parsed)
    assert message in error.message
    assert (parsed.protocol, error.status, error.code) == (Protocol.KSERVE_V2, 400, "invalid_image")


@pytest.mark.parametrize(
    ("header", "binary"),
    [
        ({}, False),
        ({"parameters": {"binary_data_output": True}}, True),
        ({"outputs": [{"name": "predictions", "parameters": {"binary_data": True}}]}, True),
        (
            {
                "parameters": {"binary_data_output": True},
                "outputs": [{"name": "predictions", "parameters": {"binary_data": False}}],
            },
            False,
        ),
        ({"outputs": [{"name": "predictions"}]}, False),
    ],
)
def test_binary_output_follows_the_request_and_the_output_own_parameter(header: dict, binary: bool) -> None:
    request, length = binary_request([b"a"], **header)
    assert parse(request, header_length=length).binary_output is binary
    document = {"inputs": [{"name": "t", "datatype": "BYTES", "shape": [1], "data": ["a"]}], **header}
    assert parse({"body": document}, TEXT_INPUTS).binary_output is binary


def test_an_unknown_requested_output_is_a_400_naming_the_outputs_that_exist() -> None:
    document = {
        "inputs": [{"name": "t", "datatype": "BYTES", "shape": [1], "data": ["a"]}],
        "outputs": [{"name": "predict"}],
    }
    error = rejection(parse({"body": document}, TEXT_INPUTS))
    assert error.message == "unknown output 'predict': this model's outputs are ['predictions']"


def test_a_binary_response_round_trips_through_its_header_and_elements() -> None:
    ok, bad = {"intent": "greet", "confidence": 0.9}, InvalidText.error("text is empty")
    request, length = binary_request([b"hi", b" "], id="q", parameters={"binary_data_output": True})
    body = compose_response(parse(request, TEXT_INPUTS, header_length=length), [ok, bad], "m")
    assert isinstance(body, BinaryBody)
    header = json.loads(body.data[: body.header_length])
    assert (header["model_name"], header["id"]) == ("m", "q")
    (output,) = header["outputs"]
    assert "data" not in output
    assert (output["name"], output["datatype"], output["shape"]) == ("predictions", "BYTES", [2])
    tensor = body.data[body.header_length :]
    assert output["parameters"] == {"binary_data_size": len(tensor)}
    elements = bytes_elements(tensor, 2, "predictions", InvalidText)
    assert [json.loads(element) for element in elements] == [ok, input_error_body(bad)]


def test_a_binary_request_whose_inputs_all_fail_is_answered_in_json() -> None:
    request, length = binary_request([b"x", b"y"], parameters={"binary_data_output": True})
    rejected = compose_response(
        parse(request, header_length=length), [InvalidImage.error("a"), InvalidImage.error("b")], "m"
    )
    assert isinstance(rejected, ErrorReply) and rejected.error.status == 400
    assert rejected.body["outputs"][0]["shape"] == [2]


def test_binary_elements_keep_empty_and_non_ascii_values() -> None:
    values = [b"", "café".encode(), bytes(range(256))]
    assert bytes_elements(encode_elements(values), 3, "x", InvalidText) == values
    assert encode_elements([b"ab"]) == b"\x02\x00\x00\x00ab"


def test_kserve_v2_request_errors_take_the_protocol_error_shape() -> None:
    request, length = binary_request([b"a"])
    broken = parse(request, header_length="999999")
    assert compose_response(broken, [], "m").body == {
        "error": f"Inference-Header-Content-Length is 999999 but the body is {len(request['body'])} bytes",
        "type": "invalid_image",
    }
    wrong_type = parse(
        {"body": {"inputs": [{"name": "t", "datatype": "FP32", "shape": [1], "data": [1]}]}}, TEXT_INPUTS
    )
    assert isinstance(compose_response(wrong_type, [], "m").body["error"], str)
    ours = parse({"body": {"texts": "x"}}, TEXT_INPUTS)
    assert compose_response(ours, [], "m").body["error"]["type"] == "invalid_text"
    rejected = compose_response(parse(request, header_length=length), [InvalidImage.error("bad")], "m")
    body = rejected.body
    assert (
        body["error"]
        == "all 1 inputs of the request were rejected (the first: bad); each input's error is in the body"
    )
    assert json.loads(body["outputs"][0]["data"][0]) == {"error": {"type": "invalid_image", "message": "bad"}}
