"""Why a latency target broke, read off the server figures: one rule per cause, thresholds named.

Every line states the figures it rests on, so a reader can check it; when no rule holds the
diagnosis says so instead of guessing.
"""

from __future__ import annotations

from collections.abc import Sequence

from tsbatch.sla.server import STAGES, ServerFigures

DOMINANT_SHARE = 0.5  # a part of the latency this large explains the breach
FULL_BATCHES = 0.9  # batches this full mean the workers, not the delay, hold requests back
SMALL_BATCHES = 0.25  # batches this empty mean the load is too low for the configured delay...
DELAY_SHARE = 0.2  # ...when the delay each request may wait is this large a part of the latency
WASTEFUL_PADDING = 0.6  # text batches with fewer real tokens than this pad away the compute


def diagnose(
    breached: Sequence[tuple[str, float]], p50_ms: float | None, server: ServerFigures | None
) -> list[str]:
    """Causes of the breached latency figures (``("p99_ms", 812.0)``, in p50, p95, p99 order), most
    telling first. The server's means are read against the lowest breached percentile they explain."""
    if server is None:
        return ["no server figures for the measured window: the cause cannot be read from TorchServe"]
    for figure, latency_ms in breached:
        lines = _causes(figure.removesuffix("_ms"), latency_ms, server)
        if lines:
            return lines
    if server.server_ms is not None and p50_ms and server.server_ms < DOMINANT_SHARE * p50_ms:
        return [
            f"TorchServe's own time ({server.server_ms:.0f} ms a request) is under half of p50 "
            f"({p50_ms:.0f} ms): the time goes outside the server (network or an overloaded load generator)"
        ]
    figure, latency_ms = breached[-1]
    if server.queue_ms is None and server.handler_ms is None:
        return [
            "the server's metrics carry no queue or handler times: the cause cannot be read from TorchServe"
        ]
    return [
        f"no single cause: queue {_ms(server.queue_ms)} and handler {_ms(server.handler_ms)} on average "
        f"against {figure.removesuffix('_ms')} {latency_ms:.0f} ms: a slow stretch, not the steady state "
        "(see the charts)"
    ]


def _causes(name: str, latency_ms: float, server: ServerFigures) -> list[str]:
    lines = []
    if server.worker_restarts:
        lines.append(
            f"{server.worker_restarts} worker restart(s) in the window: requests waited while a worker "
            "reloaded the model (see the TorchServe log)"
        )
    lines.extend(_queue(name, latency_ms, server))
    lines.extend(_handler(name, latency_ms, server))
    fill, settings = server.fill_ratio, server.settings
    waits_for_nothing = settings is not None and settings.max_batch_delay_ms >= DELAY_SHARE * latency_ms
    if fill is not None and settings is not None and fill < SMALL_BATCHES and waits_for_nothing:
        lines.append(
            f"batches average {server.mean_batch_size:.1f} of {settings.batch_size}: load too low "
            f"for this maxBatchDelay ({settings.max_batch_delay_ms} ms): lower it or send more"
        )
    if server.padding_efficiency is not None and server.padding_efficiency < WASTEFUL_PADDING:
        lines.append(
            f"text batches are {server.padding_efficiency:.0%} real tokens: padding wastes the forward "
            "pass: smaller batches or a lower token budget"
        )
    return lines


def _ms(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.0f} ms"


def _queue(name: str, latency_ms: float, server: ServerFigures) -> list[str]:
    if server.queue_ms is None or latency_ms <= 0 or server.queue_ms < DOMINANT_SHARE * latency_ms:
        return []
    share = f"queue time is {server.queue_ms / latency_ms:.0%} of {name} ({server.queue_ms:.0f} of {latency_ms:.0f} ms)"
    settings, fill = server.settings, server.fill_ratio
    if settings is None or fill is None:
        return [f"{share}: more workers or a smaller maxBatchDelay"]
    if fill >= FULL_BATCHES:
        return [f"{share} with batches {fill:.0%} full: the workers are saturated: add workers"]
    if server.queue_ms <= 1.5 * settings.max_batch_delay_ms:
        return [
            f"{share}, mostly the maxBatchDelay wait ({settings.max_batch_delay_ms} ms): lower maxBatchDelay"
        ]
    return [
        f"{share} with batches {fill:.0%} full: requests wait for a busy worker: "
        f"more workers (now {settings.max_workers}) or a smaller maxBatchDelay"
    ]


def _handler(name: str, latency_ms: float, server: ServerFigures) -> list[str]:
    handler = server.handler_ms
    if handler is None or latency_ms <= 0 or handler < DOMINANT_SHARE * latency_ms:
        return []
    slowest = max(STAGES, key=lambda stage: server.stage_ms(stage) or 0.0)
    share = (
        f"handler time is {handler / latency_ms:.0%} of {name} ({handler:.0f} of {latency_ms:.0f} ms a batch, "
        f"{slowest} {server.stage_ms(slowest) or 0.0:.0f} ms)"
    )
    fill, settings = server.fill_ratio, server.settings
    if fill is not None and settings is not None and fill < FULL_BATCHES / 2:
        return [
            f"{share} with batches of {server.mean_batch_size:.1f} of {settings.batch_size}: the model is slow "
            f"even on small batches: a faster {slowest} or more compute per worker"
        ]
    return [f"{share}: a faster {slowest} or a smaller batchSize"]
