"""The intent benchmark's own parts: its settings and its summary (no server)."""

from __future__ import annotations

import pytest

from tsbatch.bench.intent import RunResult, parse_setting, summarize


def test_settings_are_workers_x_threads() -> None:
    assert parse_setting("2x1") == (2, 1)
    assert parse_setting("1X2") == (1, 2)
    assert parse_setting("3") == (3, 1)


def result(handler: str, workers: int, rps: float, errors: int = 0) -> RunResult:
    return RunResult(handler, workers, 1, 16, 10.0, int(rps * 10), errors, rps, 10.0, 20.0, 30.0, 40.0)


def test_summary_compares_each_handler_at_its_best_error_free_setting() -> None:
    summary = summarize(
        [
            result("ours", 1, 200.0),
            result("usual", 1, 40.0),
            result("ours", 2, 320.0),
            result("usual", 2, 50.0, errors=3),
        ]
    )
    assert summary["best"]["ours"]["workers"] == 2
    assert summary["best"]["usual"]["workers"] == 1  # the faster run had errors
    assert summary["ratios"]["best_vs_best"] == pytest.approx(8.0)
    assert summary["ratios"]["1x1"] == pytest.approx(5.0)


def test_summary_gives_the_speedup_over_the_fp32_torchscript_row() -> None:
    summary = summarize([result("ours", 2, 300.0), result("fp32-ts", 2, 200.0)])
    assert summary["ratios"]["vs_fp32_ts_2x1"] == pytest.approx(1.5)
    assert "speedup vs fp32 TorchScript served at 2x1: 1.50x" in summary["lines"]
