"""TorchServe's Prometheus text read into samples, per-model counters and the formed batch."""

from __future__ import annotations

import pytest

from tsbatch.client.metrics import (
    MetricSample,
    counters_by_model,
    mean_formed_batch,
    model_counters,
    parse_samples,
)

METRICS_BEFORE = """\
# HELP BatchesTotal Torchserve prometheus counter metric with unit: count
# TYPE BatchesTotal counter
BatchesTotal{ModelName="resnet18",Level="Model",Hostname="vm",} 20.0
BatchesTotal{ModelName="bert_intent",Level="Model",Hostname="vm",} 7.0
# HELP BatchedRequestsTotal Torchserve prometheus counter metric with unit: count
# TYPE BatchedRequestsTotal counter
BatchedRequestsTotal{ModelName="resnet18",Level="Model",Hostname="vm",} 20.0
BatchedRequestsTotal{ModelName="bert_intent",Level="Model",Hostname="vm",} 50.0
ts_inference_requests_total{model_name="resnet18",model_version="default",hostname="vm",} 20.0
"""
METRICS_AFTER = METRICS_BEFORE.replace(
    'BatchesTotal{ModelName="resnet18",Level="Model",Hostname="vm",} 20.0',
    'BatchesTotal{ModelName="resnet18",Level="Model",Hostname="vm",} 120.0',
).replace(
    'BatchedRequestsTotal{ModelName="resnet18",Level="Model",Hostname="vm",} 20.0',
    'BatchedRequestsTotal{ModelName="resnet18",Level="Model",Hostname="vm",} 670.0',
)
BATCHES = ["BatchesTotal"]


def test_counters_are_read_per_model_label() -> None:
    assert model_counters(METRICS_BEFORE, "resnet18", BATCHES) == {"BatchesTotal": 20.0}
    assert model_counters(METRICS_BEFORE, "bert_intent", ["BatchedRequestsTotal"]) == {
        "BatchedRequestsTotal": 50.0
    }
    assert model_counters(METRICS_BEFORE, "absent", BATCHES) == {"BatchesTotal": 0.0}
    assert model_counters(METRICS_BEFORE, "resnet18", ["Batches"]) == {"Batches": 0.0}  # no prefix matches


def test_counters_sum_every_series_of_the_model() -> None:
    text = (
        'Requests{ModelName="m",Code="200"} 3\n'
        'Requests{Code="503",ModelName="m"} 2 1700000000000\n'  # label order and a timestamp
        'Requests{ModelName="other",Code="200"} 40\n'
    )
    assert model_counters(text, "m", ["Requests"]) == {"Requests": 5.0}


def test_mean_formed_batch_is_the_rate_of_requests_over_batches() -> None:
    assert mean_formed_batch(METRICS_BEFORE, METRICS_AFTER, "resnet18") == pytest.approx(650 / 100)
    assert mean_formed_batch(METRICS_BEFORE, METRICS_AFTER, "bert_intent") is None  # no batch in the window


def test_samples_keep_labels_unescaped_and_skip_comments() -> None:
    text = '# TYPE up gauge\n\nup 1\nInfo{path="C:\\\\x",note="say \\"hi\\"\\n"} NaN\n'
    samples = list(parse_samples(text))
    assert samples[0] == MetricSample("up", {}, 1.0)
    assert samples[1].labels == {"path": "C:\\x", "note": 'say "hi"\n'}
    assert samples[1].value != samples[1].value  # NaN
    assert len(samples) == 2


def test_counters_by_model_reads_both_model_labels_and_leaves_out_absent_counters() -> None:
    text = (
        METRICS_BEFORE
        + 'ts_queue_latency_microseconds{model_name="resnet18",model_version="default",} 5000.0\n'
    )
    names = [
        "BatchesTotal",
        "ts_inference_requests_total",
        "ts_queue_latency_microseconds",
        "PaddedTokensTotal",
    ]
    counters = counters_by_model(text, ["resnet18", "bert_intent"], names)
    assert counters["resnet18"] == {
        "BatchesTotal": 20.0,
        "ts_inference_requests_total": 20.0,
        "ts_queue_latency_microseconds": 5000.0,
    }
    assert counters["bert_intent"] == {"BatchesTotal": 7.0}  # no padding counter: not exported, not 0


def test_a_ratio_of_rises_survives_a_counter_reset() -> None:
    from tsbatch.client.metrics import rise_ratio

    before, after = (
        {"BatchesTotal": 50.0, "BatchedRequestsTotal": 400.0},
        {"BatchesTotal": 5.0, "BatchedRequestsTotal": 30.0},
    )
    assert rise_ratio(before, after, "BatchedRequestsTotal", "BatchesTotal") == 6.0
    assert rise_ratio(after, after, "BatchedRequestsTotal", "BatchesTotal") is None
