"""What TorchServe did while the SLA was measured: batches formed, queue vs handler time, restarts.

Figures come from the rise of TorchServe's counters between two scrapes of ``/metrics``
(:class:`ServerSnapshot`), so a window's mean is exact to the nearest scrape, not a
sample of last-value gauges. The configured batch settings and the worker pids come from
the management API's model description. Plain Python: the Locust scraper
(:mod:`tsbatch.locust.server_view`) feeds it, the gate judges the optional server targets
with it, and :func:`diagnose` turns the figures into the reason a latency target broke.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from tsbatch.settings.batch import BatchSettings

STAGES = ("preprocess", "inference", "postprocess")
SERVER_COUNTERS = (
    "BatchesTotal",
    "BatchedRequestsTotal",
    "ShedRequestsTotal",
    "PreprocessMsTotal",
    "InferenceMsTotal",
    "PostprocessMsTotal",
    "PaddedTokensTotal",
    "RealTokensTotal",
    "ts_inference_requests_total",
    "ts_queue_latency_microseconds",
    "ts_inference_latency_microseconds",
)
# Optional targets of loadtest/sla.yaml on server figures -> the ServerFigures field they judge.
SERVER_TARGETS = {
    "min_mean_batch_size": "mean_batch_size",
    "max_queue_ms": "queue_ms",
    "max_worker_restarts": "worker_restarts",
}


@dataclass(frozen=True)
class ServerSnapshot:
    """One scrape of one model: when (epoch s), its counters, its workers' pids (``None``: unknown)."""

    at: float
    counters: Mapping[str, float]
    worker_pids: frozenset[int] | None = None


@dataclass(frozen=True)
class ServerFigures:
    """One model between two scrapes. Queue and server times are means per request; stage times
    means per batch (every request of a batch waits for the whole batch)."""

    model: str
    start: float
    end: float
    batches: int
    requests: int
    mean_batch_size: float | None
    queue_ms: float | None
    server_ms: float | None
    preprocess_ms: float | None
    inference_ms: float | None
    postprocess_ms: float | None
    padding_efficiency: float | None
    settings: BatchSettings | None = None
    worker_restarts: int | None = None
    shed: int | None = None  # answered 503 before compute for their deadline; None: not exported

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def fill_ratio(self) -> float | None:
        if self.mean_batch_size is None or self.settings is None:
            return None
        return self.mean_batch_size / self.settings.batch_size

    @property
    def handler_ms(self) -> float | None:
        stages = [self.stage_ms(stage) for stage in STAGES]
        return None if any(value is None for value in stages) else sum(v for v in stages if v is not None)

    def stage_ms(self, stage: str) -> float | None:
        return getattr(self, f"{stage}_ms")

    def figure(self, target: str) -> float | None:
        value = getattr(self, SERVER_TARGETS[target])
        return None if value is None else float(value)

    def as_dict(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 3),
            "batches": self.batches,
            "requests": self.requests,
            "mean_batch_size": self.mean_batch_size,
            "fill_ratio": self.fill_ratio,
            "queue_ms": self.queue_ms,
            "handler_ms": self.handler_ms,
            "server_ms": self.server_ms,
            **{f"{stage}_ms": self.stage_ms(stage) for stage in STAGES},
            "padding_efficiency": self.padding_efficiency,
            "worker_restarts": self.worker_restarts,
            "shed": self.shed,
            "settings": None if self.settings is None else vars(self.settings),
        }


def counter_rise(before: float, after: float) -> float:
    """How much a counter rose between two scrapes, restart-safe: a restarted server starts
    its counters again from 0, so a fall means ``after`` is what was counted since."""
    return after - before if after >= before else after


def _ratio(numerator: float | None, denominator: float | None, scale: float = 1.0) -> float | None:
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator * scale / denominator


def figures_between(
    model: str,
    first: ServerSnapshot,
    last: ServerSnapshot,
    settings: BatchSettings | None = None,
    restarts: int | None = None,
) -> ServerFigures:
    """The model's figures over ``[first.at, last.at]``; a figure with nothing to divide by is ``None``."""

    def rise(name: str) -> float | None:
        """``None`` when the server does not export it (an archive built before the metric existed)."""
        if name not in last.counters:
            return None
        return counter_rise(first.counters.get(name, 0.0), last.counters[name])

    batches, requests = rise("BatchesTotal") or 0.0, rise("BatchedRequestsTotal") or 0.0
    frontend_requests = rise("ts_inference_requests_total")
    stages = {stage: _ratio(rise(f"{stage.capitalize()}MsTotal"), batches) for stage in STAGES}
    return ServerFigures(
        model=model,
        start=first.at,
        end=last.at,
        batches=int(batches),
        requests=int(requests),
        mean_batch_size=_ratio(requests, batches),
        queue_ms=_ratio(rise("ts_queue_latency_microseconds"), frontend_requests, 1e-3),
        server_ms=_ratio(rise("ts_inference_latency_microseconds"), frontend_requests, 1e-3),
        preprocess_ms=stages["preprocess"],
        inference_ms=stages["inference"],
        postprocess_ms=stages["postprocess"],
        padding_efficiency=_ratio(rise("RealTokensTotal"), rise("PaddedTokensTotal")),
        settings=settings,
        worker_restarts=restarts,
        shed=None if (shed := rise("ShedRequestsTotal")) is None else int(shed),
    )


def worker_restarts(snapshots: Sequence[ServerSnapshot]) -> int | None:
    """Workers whose pid appeared after the first snapshot (a restart gets a new process)."""
    if not snapshots or snapshots[0].worker_pids is None:
        return None
    seen = set(snapshots[0].worker_pids)
    started = 0
    for snapshot in snapshots[1:]:
        new = (snapshot.worker_pids or frozenset()) - seen
        started += len(new)
        seen |= new
    return started


def window_figures(
    model: str,
    snapshots: Sequence[ServerSnapshot],
    start: float | None,
    end: float,
    settings: BatchSettings | None = None,
) -> ServerFigures | None:
    """Figures between the first and the last scrape inside ``[start, end]``; ``None`` under two scrapes."""
    if start is None:
        return None
    inside = [snapshot for snapshot in snapshots if start <= snapshot.at <= end]
    if len(inside) < 2:
        return None
    return figures_between(model, inside[0], inside[-1], settings, worker_restarts(inside))


def timeline(model: str, snapshots: Sequence[ServerSnapshot]) -> list[ServerFigures]:
    """Figures of every interval between consecutive scrapes, for the charts."""
    return [figures_between(model, a, b) for a, b in pairwise(snapshots)]
