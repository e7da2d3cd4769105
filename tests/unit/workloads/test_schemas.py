"""Response-body checks: the documented answers pass, every kind of wrong one is named."""

from __future__ import annotations

import json

import pytest

from tsbatch.workloads import schemas

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
    assert schemas.body_problems("resnet18", 200, json.dumps(RESNET_OK)) == []
    assert schemas.body_problems("bert_intent", 200, json.dumps(INTENT_OK).encode()) == []


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"model": "resnet50"}, "model is 'resnet50'"),
        ({"predictions": []}, "predictions is empty"),
        (
            {
                "predictions": [
                    {"label": "7", "index": 7, "probability": 0.1},
                    {"label": "1", "index": 1, "probability": 0.9},
                ]
            },
            "not sorted",
        ),
        ({"predictions": [{"label": 7, "index": 7, "probability": 0.9}]}, "'label' is int"),
        ({"predictions": [{"label": "7", "index": True, "probability": 0.9}]}, "'index' is bool"),
        ({"predictions": [{"label": "7", "index": 7, "probability": "high"}]}, "probability is str"),
        ({"predictions": [{"label": "7", "index": 7, "probability": 1.5}]}, "outside [0, 1]"),
    ],
)
def test_wrong_resnet_bodies_are_named(change: dict, problem: str) -> None:
    problems = schemas.resnet_problems({**RESNET_OK, **change})
    assert any(problem in p for p in problems), problems


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"in_scope": "yes"}, "'in_scope' is str"),
        ({"truncated": None}, "'truncated' is NoneType"),
        ({"confidence": None}, "confidence is NoneType"),
        ({"top_k": [{"intent": "a", "probability": 0.1}, {"intent": "b", "probability": 0.5}]}, "not sorted"),
        ({"top_k": [{"probability": 0.5}]}, "missing 'intent'"),
        ({"intent": 3}, "'intent' is int"),
    ],
)
def test_wrong_intent_bodies_are_named(change: dict, problem: str) -> None:
    problems = schemas.intent_problems({**INTENT_OK, **change})
    assert any(problem in p for p in problems), problems


def test_missing_keys_and_non_json_bodies() -> None:
    assert schemas.intent_problems({"model": "bert_intent"})[0] == "missing 'intent'"
    assert schemas.body_problems("resnet18", 200, b"<html>") == ["body is not JSON"]
    assert schemas.body_problems("resnet18", 200, b"[]") == ["body is list, expected a JSON object"]


def test_error_answers_carry_their_message() -> None:
    ours = json.dumps({"error": {"type": "InvalidImage", "message": "not an image"}})
    torchserve = json.dumps(
        {"code": 400, "type": "InvalidKeyException", "message": "Token Authorization failed."}
    )
    assert schemas.body_problems("resnet18", 400, ours) == ["HTTP 400: InvalidImage: not an image"]
    assert schemas.body_problems("resnet18", 400, torchserve) == [
        "HTTP 400: InvalidKeyException: Token Authorization failed."
    ]
    assert schemas.body_problems("resnet18", 503, b"") == ["HTTP 503"]


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
        assert schemas.multi_input_problems("resnet18", 200, json.dumps(body), 2) == []
    assert schemas.multi_input_problems("resnet18", 200, json.dumps(RESNET_OK), 2) == [
        "no per-input answers (results, predictions or outputs)"
    ]
    assert schemas.multi_input_problems("resnet18", 200, json.dumps({"results": [RESNET_OK]}), 2) == [
        "1 answers for 2 inputs"
    ]
    error = {"error": {"type": "invalid_image", "message": "bad"}}
    problems = schemas.multi_input_problems("resnet18", 200, json.dumps({"results": [RESNET_OK, error]}), 2)
    assert problems and problems[0].startswith("input 1: missing 'model'")
    assert schemas.multi_input_problems("resnet18", 413, json.dumps(error), 2) == [
        "HTTP 413: invalid_image: bad"
    ]
