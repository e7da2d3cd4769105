"""Response-body checks: status, JSON and envelopes around each kind's answer check
(whose own tests are tests/unit/kinds/<kind>/test_workload.py)."""

from __future__ import annotations

import json

from tsbatch.kinds.image.workload import WORKLOAD as IMAGES
from tsbatch.kinds.text.workload import WORKLOAD as TEXTS
from tsbatch.workloads import schemas

RESNET = IMAGES.answer_check("resnet18")

RESNET_OK = {
    "model": "resnet18",
    "predictions": [
        {"label": "7", "index": 7, "probability": 0.9},
        {"label": "1", "index": 1, "probability": 0.1},
    ],
}
INTENT_OK = {
    "model": "bert_intent",
    "intent": "freeze_account",
    "confidence": 0.93,
    "in_scope": True,
    "top_k": [{"intent": "freeze_account", "probability": 0.93}, {"intent": "oos", "probability": 0.02}],
    "truncated": False,
}


def test_valid_bodies_have_no_problems() -> None:
    assert schemas.body_problems(200, json.dumps(RESNET_OK), RESNET) == []
    assert schemas.body_problems(200, json.dumps(INTENT_OK).encode(), TEXTS.answer_check("bert_intent")) == []
    assert schemas.body_problems(200, json.dumps(INTENT_OK), RESNET) == ["missing 'predictions'"]


def test_missing_keys_and_non_json_bodies() -> None:
    assert schemas.body_problems(200, b"<html>", RESNET) == ["body is not JSON"]
    assert schemas.body_problems(200, b"[]", RESNET) == ["body is list, expected a JSON object"]


def test_error_answers_carry_their_message() -> None:
    ours = json.dumps({"error": {"type": "InvalidImage", "message": "not an image"}})
    torchserve = json.dumps(
        {"code": 400, "type": "InvalidKeyException", "message": "Token Authorization failed."}
    )
    assert schemas.body_problems(400, ours, RESNET) == ["HTTP 400: InvalidImage: not an image"]
    assert schemas.body_problems(400, torchserve, RESNET) == [
        "HTTP 400: InvalidKeyException: Token Authorization failed."
    ]
    assert schemas.body_problems(503, b"", RESNET) == ["HTTP 503"]


def test_multi_input_answers_are_checked_in_every_protocol() -> None:
    v2_data = [json.dumps(RESNET_OK)] * 2
    for body in (
        {"results": [RESNET_OK, RESNET_OK]},
        {"predictions": [RESNET_OK, RESNET_OK]},
        {
            "model_name": "resnet18",
            "outputs": [{"name": "predictions", "datatype": "BYTES", "data": v2_data}],
        },
    ):
        assert schemas.multi_input_problems(200, json.dumps(body), 2, RESNET) == []
    assert schemas.multi_input_problems(200, json.dumps(RESNET_OK), 2, RESNET) == [
        "no per-input answers (results, predictions or outputs)"
    ]
    assert schemas.multi_input_problems(200, json.dumps({"results": [RESNET_OK]}), 2, RESNET) == [
        "1 answers for 2 inputs"
    ]
    error = {"error": {"type": "invalid_image", "message": "bad"}}
    problems = schemas.multi_input_problems(200, json.dumps({"results": [RESNET_OK, error]}), 2, RESNET)
    assert problems and problems[0].startswith("input 1: missing 'model'")
    assert schemas.multi_input_problems(413, json.dumps(error), 2, RESNET) == ["HTTP 413: invalid_image: bad"]
