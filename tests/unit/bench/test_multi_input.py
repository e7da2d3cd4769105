"""The multi-input benchmark's request bodies and answer checks (tsbatch/bench/multi_input.py)."""

from __future__ import annotations

import base64
import json

from tsbatch.bench.multi_input import digit_images, multi_bodies, multi_check

ANSWER = {"model": "resnet18", "predictions": [{"label": "7", "index": 7, "probability": 0.9}]}


def test_every_image_is_sent_in_requests_of_the_asked_size() -> None:
    images = digit_images(10)
    bodies = [json.loads(body)["images"] for body in multi_bodies(images, 4)]
    assert [len(body) for body in bodies] == [4, 4, 4]
    sent = [base64.b64decode(value) for body in bodies for value in body]
    assert sent[:10] == images and sent[10:] == images[:2]  # the last request wraps around


def test_a_multi_input_answer_needs_one_good_answer_per_image() -> None:
    check = multi_check(2)
    assert check(200, json.dumps({"results": [ANSWER, ANSWER]}).encode()) is None
    assert check(200, json.dumps({"results": [ANSWER]}).encode()) == "1 answers for 2 inputs"
    assert check(400, b'{"error": {"type": "x", "message": "m"}}') == "HTTP 400: x: m"
