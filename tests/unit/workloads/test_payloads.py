"""What the load generator sends and accepts: payload pools, response schemas, token, mix, shapes."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from PIL import Image

from tsbatch.client.auth import TOKEN_ENV, TokenError, auth_headers, inference_token
from tsbatch.locust import shapes
from tsbatch.locust.options import parse_mix, run_config
from tsbatch.sla.profiles import DEFAULT_SLA_FILE, SlaError
from tsbatch.workloads import payloads, schemas

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


# ---------------------------------------------------------------- payloads
def test_image_pool_varies_size_format_and_kind() -> None:
    pool = payloads.image_pool(seed=1, sides=(32, 256, 1024))
    assert len(pool) == 6
    decoded = [Image.open(io.BytesIO(p.body)) for p in pool]
    assert {img.format for img in decoded} == {"PNG", "JPEG", "WEBP"}
    assert {p.content_type for p in pool} == {"image/png", "image/jpeg", "image/webp"}
    assert max(max(img.size) for img in decoded) == 1024 and min(max(img.size) for img in decoded) == 32
    assert {p.description.split()[0] for p in pool} == {"digit", "photo"}
    assert [p.body for p in payloads.image_pool(seed=1, sides=(32,))] == [p.body for p in pool[:2]]


def test_text_pool_uses_the_test_split_and_adds_long_utterances(tmp_path: Path) -> None:
    split = tmp_path / "test.csv"
    split.write_text('text,label\nfreeze my card,freeze_account\n"where is it, my card",card_arrival\n\n')
    texts = payloads.read_utterances(split, tmp_path / "raw")
    assert texts == ["freeze my card", "where is it, my card"]
    pool = payloads.text_pool(texts * 20, seed=0, json_share=0.5)
    as_json = [json.loads(p.body)["text"] for p in pool if p.content_type == "application/json"]
    plain = [p.body.decode() for p in pool if p.content_type.startswith("text/plain")]
    assert as_json and plain
    assert max(len(text) for text in plain) > 6 * len("freeze my card")  # joined, past max_length


def test_text_pool_falls_back_to_the_raw_files(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "a.csv").write_text("text,label\nhello there,greeting\n")
    (raw / "b.csv").write_text("text,label\nwhat's the weather,oos\n")
    assert payloads.read_utterances(tmp_path / "missing.csv", raw) == ["hello there", "what's the weather"]
    with pytest.raises(FileNotFoundError):
        payloads.read_utterances(tmp_path / "missing.csv", tmp_path / "nothing")


def test_the_projects_own_utterances_load() -> None:
    assert len(payloads.read_utterances()) > 50


# ---------------------------------------------------------------- schemas
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


# ---------------------------------------------------------------- token
def test_token_from_env_wins_over_key_file(tmp_path: Path) -> None:
    key_file = tmp_path / "key_file.json"
    key_file.write_text(
        json.dumps({"management": {"key": "m"}, "inference": {"key": "i-key"}, "API": {"key": "a"}})
    )
    assert inference_token(key_file, env={})[0] == "i-key"
    assert inference_token(key_file, env={TOKEN_ENV: "from-env"}) == ("from-env", f"${TOKEN_ENV}")
    assert inference_token(tmp_path / "absent.json", env={})[0] is None
    assert auth_headers("i-key") == {"Authorization": "Bearer i-key"}
    assert auth_headers(None) == {}


def test_expired_key_is_reported_and_bad_files_refused(tmp_path: Path) -> None:
    key_file = tmp_path / "key_file.json"
    key_file.write_text(
        json.dumps({"inference": {"key": "k", "expiration time": "2001-01-01T00:00:00.123456789Z"}})
    )
    token, source = inference_token(key_file, env={})
    assert token == "k" and "expiration time has passed" in source
    key_file.write_text(json.dumps({"management": {"key": "m"}}))
    with pytest.raises(TokenError):
        inference_token(key_file, env={})


# ---------------------------------------------------------------- mix and SLA selection
def test_parse_mix() -> None:
    assert parse_mix("resnet18=3, bert_intent=1") == {"resnet18": 3.0, "bert_intent": 1.0}
    assert parse_mix("resnet18") == {"resnet18": 1.0}
    assert parse_mix("resnet18=1,bert_intent=0") == {"resnet18": 1.0}
    for bad in ("", "resnet18=0", "resnet18=x", "resnet18=-1"):
        with pytest.raises(ValueError):
            parse_mix(bad)


def test_run_config_needs_an_sla_for_every_model_in_the_mix(tmp_path: Path) -> None:
    options = SimpleNamespace(
        mix="resnet18=1,bert_intent=1", sla_profile="cpu", sla_file=str(DEFAULT_SLA_FILE)
    )
    config = run_config(options)
    assert config.models == ["resnet18", "bert_intent"] and config.slas["resnet18"].profile == "cpu"
    with pytest.raises(SlaError):
        run_config(SimpleNamespace(mix="resnet50=1", sla_profile="cpu", sla_file=str(DEFAULT_SLA_FILE)))
    with pytest.raises(SlaError):
        run_config(SimpleNamespace(mix="resnet18=1", sla_profile="nope", sla_file=str(DEFAULT_SLA_FILE)))


# ---------------------------------------------------------------- shapes
def test_steady_holds_then_stops() -> None:
    params = shapes.ShapeParams("steady", users=8, spawn_rate=4, run_time=30)
    assert shapes.target(params, 0) == (8, 4)
    assert shapes.target(params, 29.9) == (8, 4)
    assert shapes.target(params, 30) is None


def test_step_climbs_to_the_top_and_holds() -> None:
    params = shapes.ShapeParams("step", users=10, spawn_rate=5, run_time=60, step_users=4, step_time=10)
    assert [shapes.target(params, t)[0] for t in (0, 9.9, 10, 20, 35, 59)] == [4, 4, 8, 10, 10, 10]
    assert shapes.target(params, 60) is None
    open_ended = shapes.ShapeParams("step", users=8, spawn_rate=5, step_time=5)  # 2 users a step
    assert [shapes.target(open_ended, t)[0] for t in (0, 5, 10, 15)] == [2, 4, 6, 8]
    assert shapes.target(open_ended, 20) is None


def test_spike_jumps_fast_and_comes_back() -> None:
    params = shapes.ShapeParams(
        "spike", users=4, spawn_rate=2, run_time=60
    )  # spike at 20 s for 10 s, 12 users
    assert shapes.target(params, 5) == (4, 2)
    assert shapes.target(params, 20) == (12, 12.0)
    assert shapes.target(params, 29.9) == (12, 12.0)
    assert shapes.target(params, 30) == (4, 12.0)


def test_shape_params_are_validated() -> None:
    with pytest.raises(ValueError):
        shapes.ShapeParams("ramp", users=1, spawn_rate=1)
    with pytest.raises(ValueError):
        shapes.ShapeParams("steady", users=0, spawn_rate=1)
