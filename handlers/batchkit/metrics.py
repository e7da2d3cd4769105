"""Per-batch handler metrics, declared in ``metrics.yaml`` so TorchServe exports them.

TorchServe drops custom metrics it does not know (unless auto-detection is on), so every
name here also appears under ``model_metrics`` in the repository's ``metrics.yaml``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

GAUGE_METRICS = {
    "BatchSize": "count",
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
    "PaddedTokensTotal": "count",
    "RealTokensTotal": "count",
}
# Observed once per request of the batch, so Prometheus quantiles are per request.
HISTOGRAM_METRICS = {
    "RequestHandlerSeconds": "s",
}


@dataclass
class BatchReport:
    """What one call of ``handle`` did, ready to be emitted."""

    batch_size: int
    max_batch_size: int
    rejected: int = 0
    preprocess_ms: float = 0.0
    inference_ms: float = 0.0
    postprocess_ms: float = 0.0
    real_tokens: int | None = None
    padded_tokens: int | None = None
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def fill_ratio(self) -> float:
        return 100.0 * self.batch_size / max(1, self.max_batch_size)

    @property
    def padding_efficiency(self) -> float | None:
        if not self.padded_tokens:
            return None
        return 100.0 * (self.real_tokens or 0) / self.padded_tokens

    def gauges(self) -> dict[str, float]:
        values = {
            "BatchSize": float(self.batch_size),
            "BatchFillRatio": self.fill_ratio,
            "PreprocessMs": self.preprocess_ms,
            "InferenceMs": self.inference_ms,
            "PostprocessMs": self.postprocess_ms,
        }
        if self.padding_efficiency is not None:
            values["PaddingEfficiency"] = self.padding_efficiency
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
            "RejectedRequestsTotal": float(self.rejected),
        }
        if self.padded_tokens is not None:
            values["PaddedTokensTotal"] = float(self.padded_tokens)
            values["RealTokensTotal"] = float(self.real_tokens or 0)
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
