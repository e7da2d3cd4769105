"""The per-process state: payload pools built once per model, verdicts only with a usable config."""

from __future__ import annotations

import pytest

from tsbatch.locust import state as state_module
from tsbatch.locust.state import LoadTestState
from tsbatch.workloads.payloads import Payload


def test_payload_pools_are_built_once_per_model(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []

    def fake_pool(kind: str) -> list[Payload]:
        built.append(kind)
        return [Payload(kind.encode(), "application/octet-stream", kind)]

    monkeypatch.setattr(state_module, "image_pool", lambda seed: fake_pool("image"))
    monkeypatch.setattr(state_module, "read_utterances", lambda: ["hello"])
    monkeypatch.setattr(state_module, "text_pool", lambda texts, seed: fake_pool("text"))
    state = LoadTestState()
    assert state.payloads_for("bert_intent", seed=0)[0].body == b"text"
    assert state.payloads_for("resnet18", seed=0)[0].body == b"image"
    assert state.payloads_for("some_vision_model", seed=0)[0].body == b"image"
    state.payloads_for("resnet18", seed=0)
    assert built == ["text", "image", "image"]


def test_no_verdicts_without_a_usable_configuration() -> None:
    state = LoadTestState(config_error="unknown profile")
    state.recorder.ramp_up_done(when=1.0)
    verdicts, window = state.live_verdicts()
    assert verdicts == [] and window.start == 1.0
