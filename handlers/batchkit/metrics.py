"""Per-batch handler metrics, declared in ``metrics.yaml`` so TorchServe exports them.

TorchServe drops custom metrics it does not know (unless auto-detection is on), so every
name here also appears under ``model_metrics`` in the repository's ``metrics.yaml``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

GAUGE_METRICS = {
    "BatchSize": "count",
    "BatchInputs": "count",
    "BatchFillRatio": "percent",
    "PreprocessMs": "ms",
    "InferenceMs": "ms",
    "PostprocessMs": "ms",
    "PaddingEfficiency": "percent",
}
COUNTER_METRICS = {
    "BatchesTotal": "count",
    "BatchedRequestsTotal": "count",
    "RejectedRequestsTotal": "count",
    "BatchedInputsTotal": "count",
    "RejectedInputsTotal": "count",
    # Requests answered 503 before decode because their deadline passed or would (deadlines.py).
    "ShedRequestsTotal": "count",
    "PaddedTokensTotal": "count",
    "RealTokensTotal": "count",
    # Summed stage times: a window's mean per batch is the rise over the rise of BatchesTotal.
    "PreprocessMsTotal": "ms",
    "InferenceMsTotal": "ms",
    "PostprocessMsTotal": "ms",
}
# Observed once per request of the batch, so Prometheus quantiles are per request.
HISTOGRAM_METRICS = {
    "RequestHandlerSeconds": "s",
}


@dataclass(frozen=True)
class PaddingStats:
    """Real and padded token counts of the forward passes of one batch."""

    real_tokens: int
    padded_tokens: int
    forward_passes: int

    @property
    def efficiency(self) -> float:
        return self.real_tokens / self.padded_tokens if self.padded_tokens else 1.0


@dataclass
class BatchReport:
    """What one call of ``handle`` did, ready to be emitted."""

    batch_size: int
    max_batch_size: int
    rejected_requests: int = 0  # requests answered with an error status
    shed_requests: int = 0  # of those, answered at once because of their deadline
    # Inputs: a request may carry several; the model ran on inputs - rejected_inputs.
    inputs: int = 0
    rejected_inputs: int = 0
    preprocess_ms: float = 0.0
    inference_ms: float = 0.0
    postprocess_ms: float = 0.0
    # Set by handlers that pad their inputs, for batches where the model ran.
    padding: PaddingStats | None = None

    @property
    def fill_ratio(self) -> float:
        return 100.0 * self.batch_size / max(1, self.max_batch_size)

    def gauges(self) -> dict[str, float]:
        values = {
            "BatchSize": float(self.batch_size),
            "BatchInputs": float(self.inputs),
            "BatchFillRatio": self.fill_ratio,
            "PreprocessMs": self.preprocess_ms,
            "InferenceMs": self.inference_ms,
            "PostprocessMs": self.postprocess_ms,
        }
        if self.padding is not None and self.padding.padded_tokens:
            values["PaddingEfficiency"] = 100.0 * self.padding.efficiency
        return values

    @property
    def handler_seconds(self) -> float:
        return (self.preprocess_ms + self.inference_ms + self.postprocess_ms) / 1000.0

    def histograms(self) -> dict[str, list[float]]:
        """Observations per histogram: the batch's handler time, once per request in it."""
        return {"RequestHandlerSeconds": [self.handler_seconds] * self.batch_size}

    def counters(self) -> dict[str, float]:
        values = {
            "BatchesTotal": 1.0,
            "BatchedRequestsTotal": float(self.batch_size),
            "RejectedRequestsTotal": float(self.rejected_requests),
            "ShedRequestsTotal": float(self.shed_requests),
            "PreprocessMsTotal": self.preprocess_ms,
            "InferenceMsTotal": self.inference_ms,
            "PostprocessMsTotal": self.postprocess_ms,
            "BatchedInputsTotal": float(self.inputs),
            "RejectedInputsTotal": float(self.rejected_inputs),
        }
        if self.padding is not None:
            values["PaddedTokensTotal"] = float(self.padding.padded_tokens)
            values["RealTokensTotal"] = float(self.padding.real_tokens)
        return values


def emit(metrics_cache: Any, model_name: str, report: BatchReport) -> None:
    """Send a batch report to TorchServe's metric cache; never fails the batch."""
    if metrics_cache is None:
        return
    try:
        from ts.metrics.metric_type_enum import MetricTypes
    except ImportError:  # running outside TorchServe
        return
    dimension_values = [model_name, "Model"]
    for values, metric_type in (
        (report.gauges(), MetricTypes.GAUGE),
        (report.counters(), MetricTypes.COUNTER),
    ):
        for name, value in values.items():
            try:
                metric = metrics_cache.get_metric(name, metric_type)
                metric.add_or_update(value, dimension_values)
            except Exception:
                logger.debug("metric %s not declared; skipped", name, exc_info=True)
    for name, observations in report.histograms().items():
        try:
            metric = metrics_cache.get_metric(name, MetricTypes.HISTOGRAM)
            for value in observations:
                metric.add_or_update(value, dimension_values)
        except Exception:  # metrics must never fail a batch
            logger.debug("metric %s not declared; skipped", name, exc_info=True)
