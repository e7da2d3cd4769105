"""The per-process state: payload pools built once per model, verdicts only with a usable config."""

from __future__ import annotations

import pytest

from tsbatch.kinds.lookup import UnknownModel
from tsbatch.locust.state import LoadTestState


def test_payload_pools_are_the_model_kind_s_and_built_once() -> None:
    state = LoadTestState()
    pool = state.payloads_for("bert_intent", seed=3)
    assert pool and all(item.content_type.startswith(("text/plain", "application/json")) for item in pool)
    assert state.payloads_for("bert_intent", seed=3) is pool
    with pytest.raises(UnknownModel, match="--requests"):
        state.payloads_for("some_vision_model", seed=0)


def test_answers_are_checked_by_the_model_kind_s_check() -> None:
    state = LoadTestState()
    check = state.answer_check("bert_intent")
    assert state.answer_check("bert_intent") is check
    assert check({"model": "bert_intent"})[0] == "missing 'intent'"


def test_no_verdicts_without_a_usable_configuration() -> None:
    state = LoadTestState(config_error="unknown profile")
    state.recorder.ramp_up_done(when=1.0)
    verdicts, window = state.live_verdicts()
    assert verdicts == [] and window.start == 1.0
