"""Server figures from the rise of TorchServe's counters between scrapes, and worker restarts."""

from __future__ import annotations

import pytest

from tsbatch.settings.batch import BatchSettings
from tsbatch.sla.server import (
    ServerSnapshot,
    counter_rise,
    figures_between,
    timeline,
    window_figures,
    worker_restarts,
)

SETTINGS = BatchSettings(batch_size=8, max_batch_delay_ms=10, min_workers=1, max_workers=1)


def snapshot(
    at: float, batches: float, requests: float, pids: frozenset[int] | None = frozenset({7})
) -> ServerSnapshot:
    """Every request waited 5 ms in the queue and spent 30 ms in TorchServe; each batch 2/20/1 ms."""
    return ServerSnapshot(
        at,
        {
            "BatchesTotal": batches,
            "BatchedRequestsTotal": requests,
            "PreprocessMsTotal": 2.0 * batches,
            "InferenceMsTotal": 20.0 * batches,
            "PostprocessMsTotal": 1.0 * batches,
            "ts_inference_requests_total": requests,
            "ts_queue_latency_microseconds": 5000.0 * requests,
            "ts_inference_latency_microseconds": 30000.0 * requests,
        },
        pids,
    )


def test_figures_are_rises_between_two_scrapes() -> None:
    figures = figures_between("resnet18", snapshot(10.0, 5, 5), snapshot(20.0, 105, 305), SETTINGS)
    assert (figures.batches, figures.requests, figures.seconds) == (100, 300, 10.0)
    assert figures.mean_batch_size == pytest.approx(3.0)
    assert figures.fill_ratio == pytest.approx(3 / 8)
    assert figures.queue_ms == pytest.approx(5.0) and figures.server_ms == pytest.approx(30.0)
    assert (figures.preprocess_ms, figures.inference_ms, figures.postprocess_ms) == pytest.approx((2, 20, 1))
    assert figures.handler_ms == pytest.approx(23.0)
    assert figures.padding_efficiency is None  # no token counters: an image model
    assert figures.shed is None  # an archive built before deadlines: unknown, not zero
    shedding = ServerSnapshot(20.0, {**snapshot(20.0, 105, 305).counters, "ShedRequestsTotal": 12.0})
    assert figures_between("resnet18", snapshot(10.0, 5, 5), shedding).shed == 12


def test_counters_the_server_does_not_export_give_no_figure_instead_of_zero() -> None:
    first = ServerSnapshot(0.0, {"BatchesTotal": 0.0, "BatchedRequestsTotal": 0.0})
    last = ServerSnapshot(
        5.0,
        {
            "BatchesTotal": 4.0,
            "BatchedRequestsTotal": 8.0,
            "RealTokensTotal": 30.0,
            "PaddedTokensTotal": 40.0,
        },
    )
    figures = figures_between("bert_intent", first, last)
    assert figures.mean_batch_size == 2.0
    assert figures.handler_ms is None and figures.queue_ms is None and figures.fill_ratio is None
    assert figures.padding_efficiency == pytest.approx(0.75)
    idle = figures_between("bert_intent", first, first)
    assert idle.mean_batch_size is None  # no batch ran: nothing to average


def test_a_new_worker_pid_counts_as_a_restart_and_unknown_pids_as_unknown() -> None:
    pids = [frozenset({7}), frozenset({7}), frozenset({9}), frozenset({9})]
    assert worker_restarts([snapshot(t, 0, 0, p) for t, p in enumerate(pids)]) == 1
    assert worker_restarts([snapshot(0, 0, 0, None), snapshot(1, 0, 0)]) is None


def test_the_window_uses_the_first_and_last_scrape_inside_it() -> None:
    scrapes = [snapshot(t, 10 * t, 30 * t) for t in range(0, 12, 2)]  # t = 0, 2, ..., 10
    scrapes[0] = snapshot(0, 0, 0)
    figures = window_figures("resnet18", scrapes, start=3.0, end=9.0, settings=SETTINGS)
    assert figures is not None and (figures.start, figures.end) == (4, 8)
    assert figures.batches == 40 and figures.worker_restarts == 0
    assert window_figures("resnet18", scrapes, start=None, end=9.0) is None  # still ramping up
    assert window_figures("resnet18", scrapes, start=8.5, end=9.0) is None  # under two scrapes


def test_timeline_has_one_point_per_interval() -> None:
    points = timeline("resnet18", [snapshot(0, 0, 0), snapshot(2, 10, 20), snapshot(4, 10, 20)])
    assert [p.mean_batch_size for p in points] == [2.0, None]


def test_a_rise_survives_a_counter_reset() -> None:
    assert counter_rise(100.0, 130.0) == 30.0
    assert counter_rise(100.0, 12.0) == 12.0  # restarted: counted again from 0
