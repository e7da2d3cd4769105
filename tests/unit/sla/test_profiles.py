"""SLA profiles: the required client targets and the optional server targets."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from tsbatch.settings.batch import BatchSettings
from tsbatch.sla import gate
from tsbatch.sla.profiles import SlaError, load_profile, option_targets, with_targets
from tsbatch.sla.server import ServerFigures

CLIENT = {"p50_ms": 50, "p95_ms": 80, "p99_ms": 100, "max_error_rate": 0.01, "min_throughput_rps": 1}


def write_profile(tmp_path: Path, targets: dict) -> Path:
    path = tmp_path / "sla.yaml"
    path.write_text(json.dumps({"default_profile": "p", "profiles": {"p": {"resnet18": targets}}}))
    return path


def server(mean_batch: float) -> ServerFigures:
    return ServerFigures(
        "resnet18", 0.0, 10.0, 10, int(10 * mean_batch), mean_batch, 5.0, 30.0, 1.0, 20.0, 1.0, None,
        BatchSettings(8, 10, 1, 1), 0,
    )  # fmt: skip


def test_server_targets_are_optional_and_judged_only_with_server_figures(tmp_path: Path) -> None:
    sla = load_profile(path=write_profile(tmp_path, {**CLIENT, "min_mean_batch_size": 2}))["resnet18"]
    assert sla.server_targets == {"min_mean_batch_size": 2.0}
    measured = gate.Measured("resnet18", 100, 0, 10.0, 10.0, 20.0, 30.0)
    judged = gate.evaluate(measured, sla, server(1.5))
    assert not judged.passed
    assert judged.breaches[0].describe() == "min_mean_batch_size = 1.5, target >= 2.0"
    assert gate.evaluate(measured, sla, server(3.0)).passed
    unjudged = gate.evaluate(measured, sla, None)  # the metrics endpoint was down
    assert unjudged.passed and unjudged.unjudged == ("min_mean_batch_size",)
    plain = load_profile(path=write_profile(tmp_path, CLIENT))["resnet18"]
    assert plain.server_targets == {}
    assert [c.figure for c in gate.evaluate(measured, plain, server(1.0)).checks] == [
        "p50_ms", "p95_ms", "p99_ms", "max_error_rate", "min_throughput_rps",
    ]  # fmt: skip


def test_an_unknown_target_is_named(tmp_path: Path) -> None:
    with pytest.raises(SlaError, match="unknown \\['min_batch'\\]"):
        load_profile(path=write_profile(tmp_path, {**CLIENT, "min_batch": 2}))


def test_the_repository_profiles_load() -> None:
    for profile in ("cpu", "gpu"):
        assert set(load_profile(profile)) == {"resnet18", "bert_intent"}


def test_a_server_figure_that_could_not_be_read_is_unjudged_not_failed(tmp_path: Path) -> None:
    sla = load_profile(path=write_profile(tmp_path, {**CLIENT, "max_worker_restarts": 0}))["resnet18"]
    measured = gate.Measured("resnet18", 100, 0, 10.0, 10.0, 20.0, 30.0)
    no_management = replace(server(3.0), worker_restarts=None)  # no management key: pids unknown
    verdict = gate.evaluate(measured, sla, no_management)
    assert verdict.passed and verdict.unjudged == ("max_worker_restarts",)
    restarted = gate.evaluate(measured, sla, replace(server(3.0), worker_restarts=1))
    assert [c.figure for c in restarted.breaches] == ["max_worker_restarts"]


def test_command_line_targets_override_the_file_and_cover_models_without_an_entry(tmp_path: Path) -> None:
    slas = load_profile(None, write_profile(tmp_path, CLIENT))
    targets = option_targets({"p99_ms": "250", "min_throughput_rps": 5, "p50_ms": None, "p95_ms": ""})
    assert targets == {"p99_ms": 250.0, "min_throughput_rps": 5.0}
    merged = with_targets(slas, ["resnet18", "mobilenet"], targets)
    assert (merged["resnet18"].p99_ms, merged["resnet18"].p50_ms) == (250.0, 50)
    assert merged["resnet18"].profile == "p + command line"
    mobilenet = merged["mobilenet"]
    assert (mobilenet.p99_ms, mobilenet.min_throughput_rps, mobilenet.max_error_rate) == (250.0, 5.0, 0.01)
    assert mobilenet.p50_ms == math.inf and mobilenet.profile == "command line"
    assert with_targets(slas, ["resnet18", "mobilenet"], {}) == slas  # no targets: the file alone


@pytest.mark.parametrize("value", ["fast", -1, [1]])
def test_a_command_line_target_must_be_a_number(value: object) -> None:
    with pytest.raises(SlaError, match="--p99-ms"):
        option_targets({"p99_ms": value})


def test_a_requests_deadline_is_its_p99_target_from_when_it_was_sent() -> None:
    sla = load_profile("cpu")["resnet18"]
    assert sla.deadline_ms(1_800_000_000.25) == 1_800_000_000_250 + sla.p99_ms
