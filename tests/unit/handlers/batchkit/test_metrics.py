"""Batch reports and what they emit (batchkit/metrics.py)."""

from __future__ import annotations

import pytest

from batchkit.metrics import BatchReport, PaddingStats


def test_padding_efficiency_is_real_over_padded_tokens() -> None:
    assert PaddingStats(real_tokens=23, padded_tokens=33, forward_passes=2).efficiency == pytest.approx(
        23 / 33
    )
    assert PaddingStats(real_tokens=0, padded_tokens=0, forward_passes=0).efficiency == 1.0


def test_a_report_without_padding_emits_no_token_figures() -> None:
    report = BatchReport(batch_size=3, max_batch_size=4, rejected_requests=1, inputs=10, rejected_inputs=2)
    assert "PaddingEfficiency" not in report.gauges()
    assert report.gauges()["BatchFillRatio"] == pytest.approx(75.0)
    assert report.gauges()["BatchInputs"] == 10.0
    assert report.counters() == {
        "BatchesTotal": 1.0,
        "BatchedRequestsTotal": 3.0,
        "RejectedRequestsTotal": 1.0,
        "ShedRequestsTotal": 0.0,
        "PreprocessMsTotal": 0.0,
        "InferenceMsTotal": 0.0,
        "PostprocessMsTotal": 0.0,
        "BatchedInputsTotal": 10.0,
        "RejectedInputsTotal": 2.0,
    }


def test_a_report_with_padding_emits_its_token_figures() -> None:
    report = BatchReport(
        batch_size=2, max_batch_size=8, padding=PaddingStats(real_tokens=6, padded_tokens=8, forward_passes=1)
    )
    assert report.gauges()["PaddingEfficiency"] == pytest.approx(75.0)
    assert report.counters()["PaddedTokensTotal"] == 8.0
    assert report.counters()["RealTokensTotal"] == 6.0


def test_handler_time_is_observed_once_per_request() -> None:
    report = BatchReport(
        batch_size=3, max_batch_size=4, preprocess_ms=1.0, inference_ms=2.0, postprocess_ms=1.0
    )
    assert report.histograms() == {"RequestHandlerSeconds": [pytest.approx(0.004)] * 3}
