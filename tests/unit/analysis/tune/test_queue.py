"""The job queue against the SLA: a queue that takes longer to drain than the p99 target
is a finding with the size that fits (tsbatch/analysis/tune/queue.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.configcheck.test_check import copy_config
from tsbatch.analysis.selection import TunePoint, select_configuration
from tsbatch.analysis.tune.queue import measured_throughput, queue_problems
from tsbatch.analysis.tune.report import queue_size_for, write_points_csv
from tsbatch.config.properties import update_model_settings
from tsbatch.configcheck.check import check
from tsbatch.settings.batch import BatchSettings
from tsbatch.sla.profiles import Sla, load_sla

SLA = Sla("resnet18", "cpu", 150, 500, 1000, 0.01, 10)
ENTRY = {"batchSize": 8, "maxBatchDelay": 10, "maxWorkers": 1}


def tune_reports(tmp_path: Path, throughput_rps: float, batch_size: int = 8) -> Path:
    points = [
        TunePoint(
            "resnet18",
            BatchSettings.for_point(batch_size, 10, 1),
            throughput_rps,
            50,
            200,
            400,
            0.0,
            4.0,
            500,
            10,
        ),
        TunePoint(
            "resnet18", BatchSettings.for_point(1, 0, 1), throughput_rps / 2, 50, 200, 400, 0.0, 1.0, 250, 10
        ),
    ]
    out = tmp_path / "tune"
    write_points_csv(select_configuration(points, SLA), out / "resnet18.csv")
    return out


def test_the_size_that_fits_drains_within_the_target_and_holds_a_batch() -> None:
    assert queue_size_for(45.7, 1000, 8) == 45  # rounded down
    assert queue_size_for(45.7, 300, 8) == 13
    assert queue_size_for(10.0, 300, 8) == 8, "never below one batch"


def test_the_throughput_is_the_tuner_s_at_the_model_s_own_settings(tmp_path: Path) -> None:
    reports = tune_reports(tmp_path, 40.0)
    settings = BatchSettings.configured({}, "resnet18", ENTRY)
    assert measured_throughput(reports, "resnet18", settings) == 40.0
    assert measured_throughput(reports, "resnet18", settings.changed(batch_size=4)) is None, "not measured"
    assert measured_throughput(tmp_path / "none", "resnet18", settings) is None


def test_a_queue_longer_than_the_target_is_a_finding_naming_the_size_that_fits(tmp_path: Path) -> None:
    reports = tune_reports(tmp_path, 40.0)
    (problem,) = queue_problems({"job_queue_size": "64"}, {"resnet18": ENTRY}, {"resnet18": SLA}, reports)
    assert (problem.severity, problem.where) == ("warning", "job_queue_size")
    assert "holds 64 requests: 1600 ms to drain at the 40.0 req/s" in problem.message
    assert "p99 target of 1000 ms" in problem.message and '"jobQueueSize": 40' in problem.message
    per_model = {"resnet18": {**ENTRY, "jobQueueSize": 100}}
    (own,) = queue_problems({"job_queue_size": "10"}, per_model, {"resnet18": SLA}, reports)
    assert own.where == "models.resnet18.jobQueueSize" and "holds 100 requests" in own.message


@pytest.mark.parametrize(
    ("properties", "entry"),
    [({"job_queue_size": "40"}, ENTRY), ({}, {**ENTRY, "jobQueueSize": 16}), ({"job_queue_size": "64"}, {})],
    ids=["fits", "per-model fits", "not measured"],
)
def test_no_finding_for_a_queue_that_fits_or_one_not_measured(
    tmp_path: Path, properties: dict[str, str], entry: dict[str, int]
) -> None:
    assert (
        queue_problems(properties, {"resnet18": entry}, {"resnet18": SLA}, tune_reports(tmp_path, 40.0)) == []
    )


def test_check_config_sizes_the_queue_from_the_tuner_s_reports(tmp_path: Path) -> None:
    path = copy_config(tmp_path)
    p99_ms = load_sla("resnet18").p99_ms
    reports = tune_reports(tmp_path, 32000 / p99_ms)  # the shipped queue (64) takes 2 x p99 to drain
    assert check(path, include_archives=False) == [], "without the tuner's reports nothing is judged"
    found = [p for p in check(path, include_archives=False, tune_dir=reports) if p.where == "job_queue_size"]
    assert len(found) == 1 and '"jobQueueSize": 32' in found[0].message
    update_model_settings(path, "resnet18", {"jobQueueSize": 32})
    assert check(path, include_archives=False, tune_dir=reports) == []
    update_model_settings(path, "resnet18", {"jobQueueSize": 0})
    (bad,) = check(path, include_archives=False, tune_dir=reports)
    assert bad.where == "models.resnet18.jobQueueSize" and "at least 1" in bad.message
