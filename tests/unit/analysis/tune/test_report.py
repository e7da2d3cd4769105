"""The tuner's report and exit status on known measurements (no server needed)."""

from __future__ import annotations

import math
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
from PIL import Image

from tsbatch.analysis.selection import TunePoint
from tsbatch.analysis.tune.report import finish, read_points_csv, report_model
from tsbatch.config.properties import model_settings, read_properties
from tsbatch.paths import REPO_ROOT
from tsbatch.settings.batch import BatchSettings
from tsbatch.sla.profiles import Sla

SLA = Sla(
    model="resnet18",
    profile="test",
    p50_ms=150,
    p95_ms=400,
    p99_ms=600,
    max_error_rate=0.01,
    min_throughput_rps=10,
)
META = {
    "load": "closed loop at concurrency 8",
    "warmup_s": 1,
    "measure_s": 3,
    "sla_file": "loadtest/sla.yaml",
    "profile": "test",
    "cpus": 2,
    "seconds": 40,
}


def measured(
    batch: int, rps: float, p99: float, delay: int = 10, workers: int = 1, mean_batch: float | None = None
) -> TunePoint:
    return TunePoint(
        "resnet18", BatchSettings.for_point(batch, delay, workers), throughput_rps=rps, p50_ms=p99 / 3, p95_ms=p99 / 1.5, p99_ms=p99,
        error_rate=0.0, mean_batch_size=mean_batch, requests=800, seconds=12.0,
    )  # fmt: skip


def copy_properties(tmp_path: Path) -> Path:
    target = tmp_path / "config.properties"
    shutil.copy(REPO_ROOT / "config.properties", target)
    return target


def assert_real_plot(path: Path) -> None:
    image = np.asarray(Image.open(path).convert("L"))
    assert image.shape[0] > 300 and image.shape[1] > 400
    assert image.std() > 10  # lines and text, not a blank canvas


def test_a_winner_is_reported_written_and_applied_with_comments_kept(tmp_path: Path) -> None:
    points = [
        measured(1, 90, 150, mean_batch=1.0),
        measured(4, 200, 110, mean_batch=3.9),
        measured(8, 350, 40, mean_batch=7.9),
    ]
    report = report_model("resnet18", points, SLA, tmp_path, ["pruned nothing"], BatchSettings(8, 10))
    assert read_points_csv(report.csv_path) == points
    assert report.selection.winner == points[2]
    assert report.ratio == 350 / 90
    assert_real_plot(report.plot_path)

    properties = copy_properties(tmp_path)
    before = properties.read_text()
    lines: list[str] = []
    assert finish([report], tmp_path, META, properties, properties, lines.append) == 0
    after = properties.read_text()
    settings = model_settings(read_properties(properties))
    assert {k: settings["resnet18"][k] for k in ("batchSize", "maxBatchDelay", "minWorkers", "maxWorkers")} == {
        "batchSize": 8, "maxBatchDelay": 10, "minWorkers": 1, "maxWorkers": 1,
    }  # fmt: skip
    before_comments = [line for line in before.splitlines() if line.startswith("#")]
    assert before_comments == [line for line in after.splitlines() if line.startswith("#")]
    summary = (tmp_path / "summary.md").read_text()
    assert "batchSize=8 maxBatchDelay=10ms 1 worker wins with 350.0 rps at p99 40 ms" in summary
    assert "3.89x the throughput of the best batch-size-1 configuration" in summary
    assert '"batchSize": 8' in (tmp_path / "recommended.properties").read_text()
    assert any("lost   b1 d10 w1    meets the SLA but slower" in line for line in lines)
    # The queue its throughput drains within the p99 target: 350 rps x 0.6 s.
    assert settings["resnet18"]["jobQueueSize"] == 210
    assert '"jobQueueSize": 210' in (tmp_path / "recommended.properties").read_text()
    assert "jobQueueSize = measured throughput x p99 target (350.0 rps x 600 ms" in summary


def test_an_auto_decode_pool_is_reported_read_back_and_applied(tmp_path: Path) -> None:
    points = [measured(8, 120, 150) for _ in range(3)]
    points = [
        replace(p, settings=p.settings.with_worker(decodeThreads=t))
        for p, t in zip(points, ("auto", 1, 2), strict=True)
    ]
    points[0] = replace(points[0], throughput_rps=130)
    report = report_model("resnet18", points, SLA, tmp_path, [], BatchSettings(8, 10))
    assert read_points_csv(report.csv_path) == points
    assert report.selection.winner == points[0]
    properties = copy_properties(tmp_path)
    assert finish([report], tmp_path, META, properties, properties, lambda _: None) == 0
    assert model_settings(read_properties(properties))["resnet18"]["decodeThreads"] == "auto"
    assert "| 8 | 10 | 1 | auto | 130.0 |" in (tmp_path / "summary.md").read_text()


def test_no_configuration_meeting_the_sla_says_so_and_exits_non_zero(tmp_path: Path) -> None:
    points = [
        measured(1, 9, 900),
        measured(8, 30, 1500),
        TunePoint(
            "resnet18", BatchSettings.for_point(16, 10, 1), failure="ServerError: worker died", seconds=30.0
        ),
    ]
    report = report_model("resnet18", points, SLA, tmp_path, [], BatchSettings())
    assert report.selection.winner is None and report.ratio is None
    assert_real_plot(report.plot_path)
    read_back = read_points_csv(report.csv_path)
    assert read_back[2].failure == "ServerError: worker died" and math.isnan(read_back[2].p99_ms)

    properties = copy_properties(tmp_path)
    before = properties.read_text()
    lines: list[str] = []
    assert finish([report], tmp_path, META, properties, properties, lines.append) == 2
    assert properties.read_text() == before  # nothing applied
    assert any("NO configuration of resnet18 meets the test SLA" in line for line in lines)
    assert any("FAILED: no configuration meets the SLA for ['resnet18']" in line for line in lines)
    assert "NO configuration of resnet18 meets the test SLA" in (tmp_path / "summary.md").read_text()
