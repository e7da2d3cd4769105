"""Request envelopes in and responses out (batchkit/protocols.py): our schema, KServe v1 and v2."""

from __future__ import annotations

import json

import pytest

from batchkit.errors import InputsRejected, InvalidImage, InvalidInput, InvalidText, PayloadTooLarge
from batchkit.images import IMAGE_INPUTS
from batchkit.protocols import FORM_ENCODED_MESSAGE, Protocol, compose_response, parse_request
from batchkit.text import TEXT_INPUTS


def parse(request: object, schema=IMAGE_INPUTS, max_inputs: int = 8):
    return parse_request(request, schema, max_inputs)


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
    assert all(isinstance(value, InvalidImage) for value in parsed.inputs[3:])
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
        ({"inputs": []}, "one tensor"),
        ({"instances": "aGk="}, "must be a list"),
        ({"instances": ["a"], "extra": 1}, "unexpected keys"),
    ],
)
def test_malformed_envelopes_reject_the_request(document: dict, message: str) -> None:
    with pytest.raises(InvalidText, match=message):
        parse({"body": document}, TEXT_INPUTS)


def test_an_empty_list_is_a_400_and_too_many_inputs_a_413() -> None:
    with pytest.raises(InvalidInput, match="no inputs"):
        parse({"body": {"images": []}})
    with pytest.raises(PayloadTooLarge, match="9 inputs; the limit is 8") as caught:
        parse({"body": {"instances": ["aGk="] * 9}})
    assert caught.value.status == 413


def test_a_form_encoded_body_that_reached_the_model_as_nothing_says_which_header_to_send() -> None:
    with pytest.raises(InvalidImage) as caught:
        parse({})
    assert caught.value.message == FORM_ENCODED_MESSAGE
    assert "Content-Type: application/octet-stream" in caught.value.message


def test_responses_follow_the_protocol_and_carry_per_input_errors() -> None:
    ok, bad = {"intent": "greet"}, InvalidText("text is empty")
    single = parse({"body": "hi"}, TEXT_INPUTS)
    assert compose_response(single, [ok], "m") == ok
    assert compose_response(single, [bad], "m") is bad
    listed = parse({"body": {"texts": ["hi", " "]}}, TEXT_INPUTS)
    assert compose_response(listed, [ok, bad], "m") == {"results": [ok, bad.to_body()]}
    v1 = parse({"body": {"instances": ["hi", " "]}}, TEXT_INPUTS)
    assert compose_response(v1, [ok, bad], "m") == {"predictions": [ok, bad.to_body()]}
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
    assert [json.loads(item) for item in output["data"]] == [ok, bad.to_body()]


def test_a_request_whose_inputs_all_fail_takes_the_first_error_status_and_keeps_each_error() -> None:
    listed = parse({"body": {"images": ["a", "b"]}})
    too_big, bad = PayloadTooLarge("big"), InvalidImage("bad")
    rejected = compose_response(listed, [too_big, bad], "m")
    assert isinstance(rejected, InputsRejected) and rejected.status == 413
    body = rejected.to_body()
    assert body["error"]["type"] == "all_inputs_rejected"
    assert body["results"] == [too_big.to_body(), bad.to_body()]
