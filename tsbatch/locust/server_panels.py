"""The server section of the SLA view, per model: rows of figures and the charts over time.

Shared by the web UI (:mod:`tsbatch.locust.webui`) and the headless report
(:mod:`tsbatch.locust.report_html`), so both show the same numbers the same way.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from tsbatch.locust.charts import Series, level, line_chart
from tsbatch.locust.server_view import ServerView
from tsbatch.sla.gate import Sample, Window, latency_percentiles
from tsbatch.sla.profiles import Sla
from tsbatch.sla.server import STAGES, ServerFigures, timeline

PERCENTILE_COLOURS = {"p50": "#2f6fdf", "p95": "#bf8700", "p99": "#cf222e"}
BATCH_COLOUR, QUEUE_COLOUR, HANDLER_COLOUR = "#1a7f37", "#8250df", "#2f6fdf"
CONSOLE_FIGURES = (
    "server view",
    "mean batch size",
    "queue time (a request)",
    "handler time (a batch)",
    "worker restarts",
)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def figure_rows(figures: ServerFigures, restarts_unknown_why: str | None = None) -> list[tuple[str, str]]:
    """``(figure, measured)`` pairs of one model's server figures, in reading order."""
    settings = figures.settings
    if figures.mean_batch_size is None:
        batch = "no batch ran"
    elif settings is None or figures.fill_ratio is None:
        batch = f"{figures.mean_batch_size:.2f} (batchSize unknown)"
    else:
        batch = f"{figures.mean_batch_size:.2f} of {settings.batch_size} ({figures.fill_ratio:.0%} full)"
    stages = ", ".join(f"{stage} {_ms(figures.stage_ms(stage))}" for stage in STAGES)
    rows = [
        ("mean batch size", batch),
        ("batches / requests", f"{figures.batches} / {figures.requests} in {figures.seconds:.1f} s"),
        ("queue time (a request)", _ms(figures.queue_ms)),
        ("handler time (a batch)", f"{_ms(figures.handler_ms)}: {stages}"),
        ("time in TorchServe (a request)", _ms(figures.server_ms)),
    ]
    if figures.padding_efficiency is not None:
        rows.append(("padding efficiency", f"{figures.padding_efficiency:.0%} real tokens"))
    if figures.shed is not None:
        rows.append(("shed for their deadline (503)", f"{figures.shed} of {figures.requests} requests"))
    restarts = "unknown" if figures.worker_restarts is None else str(figures.worker_restarts)
    if figures.worker_restarts is None and restarts_unknown_why:
        restarts += f" ({restarts_unknown_why})"
    rows.append(("worker restarts", restarts))
    if settings is not None:
        rows.append(
            (
                "batch settings (management API)",
                f"batchSize {settings.batch_size}, maxBatchDelay {settings.max_batch_delay_ms} ms, "
                f"workers {settings.min_workers}-{settings.max_workers}",
            )
        )
    return rows


def server_rows(view: ServerView | None, window: Window) -> list[dict[str, str]]:
    """The web tab's rows (its model/figure/target/measured/result columns) for the server section."""
    if view is None:
        return [row("all models", "server view", "unavailable: no test started")]
    per_model = view.figures(window)
    if not any(per_model.values()):
        return [row("all models", "server view", f"unavailable: {view.unavailable_reason(window)}")]
    rows = []
    for model, figures in per_model.items():
        if figures is None:
            rows.append(row(model, "server view", "unavailable: under two scrapes in the measured window"))
        else:
            pairs = figure_rows(figures, view.management_error)
            rows.extend(row(model, f"server: {name}", value) for name, value in pairs)
    return rows


def console_lines(view: ServerView | None, window: Window) -> list[str]:
    """The server figures a CI log needs to read the verdict, before the SLA table."""
    lines = ["Server view (TorchServe over the measured window):"]
    for entry in server_rows(view, window):
        name = entry["figure"].removeprefix("server: ")
        if name in CONSOLE_FIGURES:
            lines.append(f"  {entry['model']}: {name} = {entry['measured']}")
    return lines


def row(model: str, figure: str, measured: str) -> dict[str, str]:
    return {"model": model, "figure": figure, "target": "", "measured": measured, "result": ""}


def latency_points(
    samples: Sequence[Sample], model: str, start: float, end: float, bucket_s: float
) -> dict[str, list[tuple[float, float | None]]]:
    """p50/p95/p99 of the requests sent in each ``bucket_s`` slice of ``[start, end)``."""
    buckets: dict[int, list[float]] = defaultdict(list)
    for sample in samples:
        if sample.model == model and sample.response_time_ms is not None and start <= sample.start < end:
            buckets[int((sample.start - start) // bucket_s)].append(sample.response_time_ms)
    points: dict[str, list[tuple[float, float | None]]] = {name: [] for name in PERCENTILE_COLOURS}
    for index in range(int((end - start) // bucket_s) + 1):
        middle = start + (index + 0.5) * bucket_s
        values = latency_percentiles(sorted(buckets.get(index, [])))
        for name, value in zip(PERCENTILE_COLOURS, values, strict=True):
            points[name].append((min(middle, end), value))
    return points


def model_charts(
    model: str, samples: Sequence[Sample], sla: Sla | None, view: ServerView | None, window: Window
) -> list[str]:
    """Client p50/p95/p99 against the SLA, and (when scraped) mean batch size and queue vs handler time."""
    snapshots = [] if view is None else view.snapshots.get(model, [])
    starts = [s.start for s in samples if s.model == model] + [s.at for s in snapshots[:1]]
    if not starts:
        return []
    origin, end = min(starts), window.end
    x_range = (origin, max(end, origin + 1.0))
    shaded = None if window.start is None else (window.start, window.end)
    bucket_s = view.interval_s if view is not None else 2.0
    latency = [
        Series(name, colour, points)
        for (name, points), colour in zip(
            latency_points(samples, model, origin, end, bucket_s).items(),
            PERCENTILE_COLOURS.values(),
            strict=True,
        )
    ]
    if sla is not None:
        latency += [
            level(f"{name} target", colour, getattr(sla, f"{name}_ms"), x_range)
            for name, colour in PERCENTILE_COLOURS.items()
        ]
    charts = [line_chart(f"{model}: client latency (ms)", latency, x_range, shaded)]
    if len(snapshots) < 2:
        return charts
    intervals = timeline(model, snapshots)
    batch = [_over_time("mean batch size", BATCH_COLOUR, intervals, lambda f: f.mean_batch_size)]
    settings = view.settings.get(model) if view is not None else None
    if settings is not None:
        batch.append(level("batchSize", BATCH_COLOUR, settings.batch_size, x_range, always_in_scale=True))
    queue = [
        _over_time("queue", QUEUE_COLOUR, intervals, lambda f: f.queue_ms),
        _over_time("handler", HANDLER_COLOUR, intervals, lambda f: f.handler_ms),
    ]
    charts.append(line_chart(f"{model}: mean batch size", batch, x_range, shaded))
    charts.append(line_chart(f"{model}: queue vs handler time (ms)", queue, x_range, shaded))
    return charts


def _over_time(
    label: str,
    colour: str,
    intervals: Sequence[ServerFigures],
    value: Callable[[ServerFigures], float | None],
) -> Series:
    """One figure per scrape interval, drawn at the interval's middle."""
    return Series(label, colour, [((f.start + f.end) / 2, value(f)) for f in intervals])
