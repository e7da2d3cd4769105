"""The one lookup of what a model is sent in a run and how its answers are judged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tsbatch.archive.manifest import UnknownModel
from tsbatch.archive.traffic import answer_check, traffic_for, unknown_models
from tsbatch.workloads.requests_files import RequestsError

ANSWER = json.dumps([{"label": "cat", "score": 0.9}]).encode()
SCHEMA = {"type": "array", "items": {"type": "object", "required": ["label", "score"]}}


def test_user_requests_pass_on_any_2xx_by_default(tmp_path: Path) -> None:
    (tmp_path / "a.jpg").write_bytes(b"jpeg")
    workload = traffic_for("mobilenet", requests=tmp_path)
    assert [p.body for p in workload.payloads] == [b"jpeg"] and not workload.several_inputs
    assert workload.check(200, b"not json") == [] and workload.check(204, None) == []
    assert workload.problem(503, b'{"code": 503, "type": "ServiceUnavailable", "message": "busy"}') == (
        "HTTP 503: ServiceUnavailable: busy"
    )


def test_a_json_schema_judges_every_answer(tmp_path: Path) -> None:
    schema = tmp_path / "answer.json"
    schema.write_text(json.dumps(SCHEMA))
    check = answer_check("mobilenet", str(schema))
    assert check(200, ANSWER) == []
    assert check(200, b'[{"label": "cat"}]') == ["0: 'score' is a required property"]
    assert check(200, b"{}") == ["body: {} is not of type 'array'"]
    assert check(200, b"<html>") == ["body is not JSON (the answer schema expects JSON)"]
    assert check(500, ANSWER)[0].startswith("HTTP 500")


def test_an_unusable_schema_fails_before_the_load(tmp_path: Path) -> None:
    schema = tmp_path / "answer.json"
    schema.write_text(json.dumps({"type": "nonsense"}))
    with pytest.raises(RequestsError, match="not a valid JSON Schema"):
        answer_check("m", str(schema))
    with pytest.raises(RequestsError, match="not a readable JSON document"):
        answer_check("m", str(tmp_path / "missing.json"))


def test_toolkit_models_keep_their_pools_and_checks() -> None:
    workload = traffic_for("bert_intent")
    assert workload.several_inputs and any(p.content_type.startswith("text/plain") for p in workload.payloads)
    assert workload.check(200, b'{"model": "bert_intent"}')  # our schema: fields missing
    image = traffic_for("resnet18")
    assert {p.content_type for p in image.payloads} >= {"image/png", "image/jpeg"}


def test_the_toolkit_schema_can_judge_user_requests(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(b"png")
    workload = traffic_for("resnet18", requests=tmp_path, answer_schema="toolkit")
    assert workload.check(200, b"{}") == ["missing 'model'", "missing 'predictions'"]


def test_a_model_without_requests_or_manifest_entry_names_requests() -> None:
    assert unknown_models(["resnet18", "mobilenet", "bert"], {"bert": Path("x")}) == ["mobilenet"]
    with pytest.raises(RequestsError, match="--requests MODEL=PATH"):
        traffic_for("mobilenet")


def test_the_toolkit_schema_needs_a_model_the_manifest_knows(tmp_path: Path) -> None:
    (tmp_path / "a.jpg").write_bytes(b"jpeg")
    with pytest.raises(UnknownModel, match="--requests"):
        traffic_for("mobilenet", requests=tmp_path, answer_schema="toolkit")
