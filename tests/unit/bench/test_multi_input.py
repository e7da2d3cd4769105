"""The multi-input benchmark's request bodies and answer checks (tsbatch/bench/multi_input.py)."""

from __future__ import annotations

import base64
import json

from batchkit.binary_tensors import binary_body, bytes_elements, encode_elements
from tsbatch.bench.multi_input import (
    binary_v2_bodies,
    binary_v2_check,
    multi_bodies,
    multi_check,
)
from tsbatch.kinds.image.examples import request_pictures

ANSWER = {"model": "resnet18", "predictions": [{"label": "7", "index": 7, "probability": 0.9}]}


def test_every_image_is_sent_in_requests_of_the_asked_size() -> None:
    images = request_pictures(10, "digits")
    bodies = [json.loads(body)["images"] for body in multi_bodies(images, 4)]
    assert [len(body) for body in bodies] == [4, 4, 4]
    sent = [base64.b64decode(value) for body in bodies for value in body]
    assert sent[:10] == images and sent[10:] == images[:2]  # the last request wraps around


def test_a_multi_input_answer_needs_one_good_answer_per_image() -> None:
    check = multi_check("resnet18", 2)
    assert check(200, json.dumps({"results": [ANSWER, ANSWER]}).encode()) is None
    assert check(200, json.dumps({"results": [ANSWER]}).encode()) == "1 answers for 2 inputs"
    assert check(400, b'{"error": {"type": "x", "message": "m"}}') == "HTTP 400: x: m"


def test_binary_v2_bodies_carry_every_image_under_one_header_length() -> None:
    images = request_pictures(6, "digits")
    bodies, length = binary_v2_bodies(images, 4)
    sent = []
    for body in bodies:
        header = json.loads(body[:length])
        assert header["parameters"] == {"binary_data_output": True}
        (tensor,) = header["inputs"]
        assert tensor["shape"] == [4] and tensor["parameters"]["binary_data_size"] == len(body) - length
        sent += bytes_elements(body[length:], 4, "image", ValueError)
    assert sent[:6] == images and sent[6:] == images[:2]


def test_a_binary_v2_answer_is_read_back_and_checked_per_image() -> None:
    check = binary_v2_check("resnet18", 2)
    header = {
        "model_name": "resnet18",
        "outputs": [{"name": "predictions", "datatype": "BYTES", "shape": [2]}],
    }
    good = binary_body(header, [encode_elements([json.dumps(ANSWER).encode()] * 2)])
    assert check(200, good.data) is None
    error = json.dumps({"error": {"type": "invalid_image", "message": "bad"}}).encode()
    one_bad = binary_body(header, [encode_elements([json.dumps(ANSWER).encode(), error])])
    assert "input 1" in check(200, one_bad.data)
    assert check(200, b"{}").startswith("not a binary v2 answer")
    assert check(400, b'{"error": "m", "type": "x"}').startswith("HTTP 400")
