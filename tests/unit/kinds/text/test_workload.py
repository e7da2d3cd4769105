"""The text kind's workload: its answer check names every wrong body, its sample call and
largest answer are what the handler takes and writes."""

from __future__ import annotations

import json

import pytest

from tsbatch.kinds.text.workload import SAMPLE_TEXT, WORKLOAD, answer_problems, largest_answer, text_pool

ANSWER = {
    "model": "bert_intent",
    "intent": "freeze_account",
    "confidence": 0.93,
    "in_scope": True,
    "top_k": [{"intent": "freeze_account", "probability": 0.93}, {"intent": "oos", "probability": 0.02}],
    "truncated": False,
}


def test_a_documented_answer_passes_and_ranks() -> None:
    assert answer_problems(ANSWER, "bert_intent") == []
    assert answer_problems(ANSWER, "other")[0] == "model is 'bert_intent', expected 'other'"
    assert answer_problems({"model": "bert_intent"}, "bert_intent")[0] == "missing 'intent'"
    assert WORKLOAD.distribution(ANSWER) == {"freeze_account": 0.93, "oos": 0.02}


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
    problems = answer_problems({**ANSWER, **change}, "bert_intent")
    assert any(problem in p for p in problems), problems


def test_the_largest_answer_is_a_valid_one() -> None:
    answer = largest_answer("m", "x" * 40, 3)
    assert answer_problems(answer, "m") == [] and len(answer["top_k"]) == 3


def test_the_sample_call_sends_text() -> None:
    (line,) = WORKLOAD.example("http://127.0.0.1:8080/predictions/m")
    assert "Content-Type: text/plain" in line and SAMPLE_TEXT in line and line.endswith("/predictions/m")


def test_text_pool_sends_plain_and_json_and_adds_long_utterances() -> None:
    texts = ["freeze my card", "where is it, my card"]
    pool = text_pool(texts * 20, seed=0, json_share=0.5)
    as_json = [json.loads(p.body)["text"] for p in pool if p.content_type == "application/json"]
    plain = [p.body.decode() for p in pool if p.content_type.startswith("text/plain")]
    assert as_json and plain
    assert set(as_json) <= set(texts)
    assert max(len(text) for text in plain) > 6 * len("freeze my card")  # joined, past max_length
