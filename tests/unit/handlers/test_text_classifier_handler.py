"""The text classifier handler with a FakeContext and a tiny random BERT (real tokenizer, no server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes import FakeContext
from tests.unit.handlers.conftest import MAX_LENGTH, TINY_LABELS
from text_classifier_handler import TextClassifierHandler


def make_handler(
    model_dir: Path, model_yaml: dict, fake_context_factory, **changes
) -> tuple[TextClassifierHandler, FakeContext]:
    config = {**model_yaml, "handler": {**model_yaml["handler"], **changes}}
    context = fake_context_factory(model_dir, config, batch_size=8)
    handler = TextClassifierHandler()
    handler.initialize(context)
    return handler, context


@pytest.fixture
def handler_and_context(tiny_intent_model_dir, fake_context_factory):
    return make_handler(*tiny_intent_model_dir, fake_context_factory)


def body(text: str) -> dict:
    return {"body": text}


def test_response_shape_and_probabilities(handler_and_context) -> None:
    handler, context = handler_and_context
    [response] = handler.handle([body("what is my balance")], context)
    assert context.status(0) == 200
    assert set(response) == {"model", "intent", "confidence", "in_scope", "top_k", "truncated"}
    assert response["model"] == "tiny_intent"
    assert {entry["intent"] for entry in response["top_k"]} <= set(TINY_LABELS)
    assert len(response["top_k"]) == 3
    probabilities = [entry["probability"] for entry in response["top_k"]]
    assert probabilities == sorted(probabilities, reverse=True)
    assert response["confidence"] == probabilities[0]
    assert response["truncated"] is False
    assert response["in_scope"] == (response["intent"] != "oos")


def test_mixed_good_and_bad_requests_fail_only_themselves(handler_and_context) -> None:
    handler, context = handler_and_context
    requests = [
        body("freeze my card"),
        body("   "),
        {"body": b"\xff\xfe"},
        {"body": {"text": "card declined at the shop"}},
        {"body": {"message": "wrong key"}},
        {"body": [1, 2]},
        body("x" * 2000),
    ]
    responses = handler.handle(requests, context)
    assert len(responses) == len(requests)
    assert [context.status(i) for i in range(len(requests))] == [200, 400, 400, 200, 400, 400, 413]
    for index in (1, 2, 4):
        assert responses[index]["error"]["type"] == "invalid_text"
    # A JSON list is a multi-input request: each input answered, the request 400 as none is valid.
    assert responses[5]["error"]["type"] == "all_inputs_rejected"
    assert [r["error"]["type"] for r in responses[5]["results"]] == ["invalid_text"] * 2
    assert responses[6]["error"]["type"] == "payload_too_large"
    assert handler.last_report.rejected_requests == 5
    assert (handler.last_report.inputs, handler.last_report.rejected_inputs) == (8, 6)
    assert all(context.content_types[i] == "application/json" for i in range(len(requests)))


def test_a_text_alone_and_inside_a_mixed_length_batch_get_the_same_answer(handler_and_context) -> None:
    handler, context = handler_and_context
    texts = [
        "hi",
        "why was my card declined at the gas station yesterday evening",
        "transfer",
        "i would like to move two hundred dollars from checking into savings today",
        "balance",
    ]
    alone = [handler.handle([body(text)], context)[0] for text in texts]
    together = handler.handle([body(text) for text in texts], context)
    for single, batched in zip(alone, together, strict=True):
        assert single["intent"] == batched["intent"]
        for a, b in zip(single["top_k"], batched["top_k"], strict=True):
            assert a["intent"] == b["intent"]
            assert a["probability"] == pytest.approx(b["probability"], abs=1e-4)


def test_long_text_is_truncated_and_says_so(handler_and_context) -> None:
    handler, context = handler_and_context
    long_text = "please tell me about my balance " * 20
    responses = handler.handle([body(long_text), body("short one")], context)
    assert [r["truncated"] for r in responses] == [True, False]
    cut = handler.handle([body(" ".join(long_text.split()[:40]))], context)[0]
    assert cut["top_k"] == responses[0]["top_k"]  # everything past max_length is ignored


def test_length_aware_passes_and_padding_efficiency(tiny_intent_model_dir, fake_context_factory) -> None:
    handler, context = make_handler(*tiny_intent_model_dir, fake_context_factory, pad_to_multiple_of=1)
    texts = ["hi", "ok", "yes", "why was my card declined at the gas station yesterday evening again"]
    handler.handle([body(t) for t in texts], context)
    report = handler.last_report
    assert report.padding.forward_passes == 2  # the long outlier ran alone
    assert report.padding.padded_tokens == report.padding.real_tokens  # so nothing was padded
    handler.handle([body("hi"), body("no")], context)
    assert handler.last_report.padding.forward_passes == 1
    emitted = context.metrics.metrics["PaddingEfficiency"].values
    assert emitted and emitted[-1][0] == pytest.approx(100.0)


def test_one_pass_when_splitting_is_off(tiny_intent_model_dir, fake_context_factory) -> None:
    handler, context = make_handler(*tiny_intent_model_dir, fake_context_factory, pass_overhead_tokens=0)
    texts = ["hi", "balance " * 30]
    handler.handle([body(t) for t in texts], context)
    report = handler.last_report
    assert report.padding.forward_passes == 1
    assert report.padding.real_tokens < report.padding.padded_tokens == 2 * MAX_LENGTH
    assert report.padding.efficiency < 1


def test_token_budget_caps_each_pass(tiny_intent_model_dir, fake_context_factory) -> None:
    handler, context = make_handler(
        *tiny_intent_model_dir, fake_context_factory, token_budget=MAX_LENGTH, pass_overhead_tokens=0
    )
    texts = ["word " * 30] * 3 + ["hi"]
    responses = handler.handle([body(t) for t in texts], context)
    assert all(context.status(i) == 200 for i in range(4))
    assert handler.last_report.padding.forward_passes == 4
    assert responses[0]["top_k"] == responses[1]["top_k"] == responses[2]["top_k"]


def test_all_bad_batch_reports_no_tokens(handler_and_context) -> None:
    handler, context = handler_and_context
    handler.handle([body("")], context)
    assert handler.last_report.padding is None
    assert context.status(0) == 400


def test_threshold_turns_low_confidence_into_oos(tiny_intent_model_dir, fake_context_factory) -> None:
    handler, context = make_handler(*tiny_intent_model_dir, fake_context_factory, oos_threshold=0.99)
    response = handler.handle([body("what is my balance")], context)[0]
    assert response["intent"] == "oos"
    assert response["in_scope"] is False
    assert response["confidence"] < 0.99


def test_warmup_items_have_different_lengths(handler_and_context) -> None:
    handler, _ = handler_and_context
    items = handler.warmup_items(4)
    assert len(items) == 4
    assert len({len(item.split()) for item in items}) == 4


def test_unknown_handler_config_key_fails_at_load(tiny_intent_model_dir, fake_context_factory) -> None:
    with pytest.raises(ValueError, match="unknown keys"):
        make_handler(*tiny_intent_model_dir, fake_context_factory, max_lenght=8)


def test_texts_of_multi_input_requests_share_the_token_budget_and_keep_their_answers(
    tiny_intent_model_dir, fake_context_factory
) -> None:
    handler, context = make_handler(
        *tiny_intent_model_dir, fake_context_factory, token_budget=MAX_LENGTH, pass_overhead_tokens=0
    )
    texts = ["word " * 30, "freeze my card", "transfer money"]
    alone = [handler.handle([body(text)], context)[0] for text in texts]
    responses = handler.handle([body({"texts": texts[:2]}), body({"instances": [texts[2], "  "]})], context)
    assert [context.status(i) for i in range(2)] == [200, 200]
    assert handler.last_report.padding.forward_passes == 2  # the long text alone, the short two together
    answers = [*responses[0]["results"], responses[1]["predictions"][0]]
    assert [answer["top_k"] for answer in answers] == [answer["top_k"] for answer in alone]
    assert responses[1]["predictions"][1]["error"] == {"type": "invalid_text", "message": "text is empty"}


def test_padded_lengths_round_up_and_every_shape_is_warmed_up(
    tiny_intent_model_dir, fake_context_factory
) -> None:
    handler, context = make_handler(*tiny_intent_model_dir, fake_context_factory, pad_to_multiple_of=8)
    assert handler.warmup_shapes() == [(size, length) for size in range(1, 9) for length in (8, 16)]
    responses = handler.handle([body("hi"), body("what is my balance today please")], context)
    assert all("error" not in response for response in responses)
    padding = handler.last_report.padding
    assert padding.padded_tokens % 8 == 0 and padding.padded_tokens >= padding.real_tokens
