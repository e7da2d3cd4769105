"""The per-process state: workloads built once per model, verdicts only with a usable config."""

from __future__ import annotations

from pathlib import Path

import pytest

from tsbatch.archive.traffic import Traffic, traffic_for
from tsbatch.locust import state as state_module
from tsbatch.locust.options import RunConfig
from tsbatch.locust.state import LoadTestState


def test_workloads_are_built_once_per_model_from_the_configuration(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    built: list[str] = []

    def fake_workload(model: str, seed: int, requests: Path | None, answer_schema: str) -> Traffic:
        built.append(model)
        return traffic_for(model, seed, requests, answer_schema)

    monkeypatch.setattr(state_module, "traffic_for", fake_workload)
    (tmp_path / "a.jpg").write_bytes(b"jpeg")
    state = LoadTestState()
    state.use_config(RunConfig({"resnet18": 1.0, "mobilenet": 1.0}, {}, {"mobilenet": tmp_path}))
    assert state.workload("mobilenet", seed=0).check(201, b"{}") == []  # any 2xx passes
    assert state.workload("resnet18", seed=0).several_inputs
    state.workload("mobilenet", seed=0)
    assert built == ["mobilenet", "resnet18"]
    state.use_config(RunConfig({"resnet18": 1.0}, {}, {"resnet18": tmp_path}, "toolkit"))
    assert state.workload("resnet18", seed=0).check(201, b"{}")  # the toolkit check wants a 200
    assert built == ["mobilenet", "resnet18", "resnet18"]


def test_no_verdicts_without_a_usable_configuration() -> None:
    state = LoadTestState(config_error="unknown profile")
    state.recorder.ramp_up_done(when=1.0)
    verdicts, window = state.live_verdicts()
    assert verdicts == [] and window.start == 1.0
