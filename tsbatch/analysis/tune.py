"""SLA-driven batch tuner through a real TorchServe (``make tune``).

For each model it searches batchSize x maxBatchDelay x worker count. Every setting tried
gets its own archive (TorchServe lets the archive's model-config.yaml win over
config.properties, so the setting must be packaged in) in a temporary model store, and
its own private TorchServe on free loopback ports, token auth on. A load driver then
sends real requests (digit PNGs to the image model, our utterances to the intent model,
with the inference token and the response schema checked) at a fixed concurrency
(closed loop) or arrival rate (open loop), and after a warm-up measures throughput,
exact p50/p95/p99 (nearest rank, as the load gate), the error rate and the mean batch
the frontend really formed (BatchedRequestsTotal over BatchesTotal at the metrics port).

The winner is the highest throughput meeting the SLA in loadtest/sla.yaml; every other
configuration is printed with the reason it lost. The search is pruned: batch delays
longer than half the SLA's p99 are never tried, batch sizes above the concurrency are
unreachable, a longer delay is skipped where a shorter one already formed full batches,
and a lane stops growing its batch once throughput stops rising.

    python -m scripts.tune                        # every model, cpu profile here
    python -m scripts.tune --model resnet18 --quick
    python -m scripts.tune --apply                # write the winners into config.properties

Exit status: 0 when every model has a winner, 2 when some model has no configuration
meeting its SLA (the report says so), 1 on errors.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import math
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from tsbatch.analysis.selection import (
    Selection,
    TunePoint,
    allowed_delays,
    batch_one_baseline,
    longer_delay_pointless,
    mean_formed_batch,
    reachable_batch_sizes,
    select_configuration,
    stop_growing_batch,
)
from tsbatch.build.manifest import Manifest, ModelSpec, load_manifest
from tsbatch.config.properties import model_settings, parse_entries, read_properties, update_model_settings
from tsbatch.paths import REPO_ROOT
from tsbatch.sla.gate import Sample, Window, measure
from tsbatch.sla.profiles import DEFAULT_SLA_FILE, Sla, load_sla
from tsbatch.workloads.payloads import Payload, image_pool, read_utterances, text_pool
from tsbatch.workloads.schemas import body_problems

DEFAULT_OUT = REPO_ROOT / "reports" / "tune"
DEFAULT_PROPERTIES = REPO_ROOT / "config.properties"
TUNED_KEYS = ("batchSize", "maxBatchDelay", "minWorkers", "maxWorkers")


# ---------------------------------------------------------------- what to try, how hard
@dataclass(frozen=True)
class SearchSpace:
    batch_sizes: list[int]
    delays_ms: list[int]
    workers: list[int]
    min_gain: float = 0.05


@dataclass(frozen=True)
class LoadSpec:
    """Closed loop at ``concurrency`` requests in flight, or open loop at ``rate_rps``."""

    concurrency: int | None = 8  # as the Locust CI load (`make loadtest`: 8 users)
    rate_rps: float | None = None
    warmup_s: float = 2.0
    measure_s: float = 8.0
    request_timeout_s: float = 30.0
    max_in_flight: int = 256  # open loop: requests due beyond this are counted as failed

    def describe(self) -> str:
        if self.rate_rps:
            return f"open loop at {self.rate_rps:g} req/s (Poisson arrivals)"
        return f"closed loop at concurrency {self.concurrency}"


FULL_SPACE = SearchSpace(batch_sizes=[1, 2, 4, 8, 16, 32], delays_ms=[5, 20], workers=[1, 2])
QUICK_SPACE = SearchSpace(batch_sizes=[1, 4, 8], delays_ms=[10], workers=[1])
QUICK_LOAD = LoadSpec(concurrency=8, warmup_s=1.0, measure_s=3.0)


# ---------------------------------------------------------------- payloads
@dataclass(frozen=True)
class Payloads:
    """Request bodies of one model and the check its answers must pass: the Locust
    scenario's own pools (loadtest/payloads.py) and schema checks (loadtest/schemas.py)."""

    model: str
    items: list[Payload]

    def check(self, status: int, body: bytes) -> str | None:
        problems = body_problems(self.model, status, body)
        return "; ".join(problems[:2]) if problems else None


def payloads_for(spec: ModelSpec, seed: int = 0) -> Payloads:
    """Digit drawings and photo-like images of many sizes and formats for an image model;
    our held-out utterances (plain text and JSON, a few over max_length) for a text model."""
    pool = image_pool(seed=seed) if spec.kind == "image" else text_pool(read_utterances(), seed=seed)
    return Payloads(spec.name, pool)


# ---------------------------------------------------------------- load driver
class Connection:
    """One keep-alive HTTP/1.1 connection, one request at a time. Raw asyncio streams keep
    the client cheap: on 2 shared cores a thread-per-user `requests` client took a quarter
    of the server's throughput."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, head: bytes, body: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        try:
            self.writer.write(head + body)
            await self.writer.drain()
            status_line = await self.reader.readline()
            if not status_line:
                raise ConnectionError("connection closed by the server")
            status = int(status_line.split()[1])
            length, chunked, close = 0, False, False
            while (line := await self.reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                name, value = name.strip().lower(), value.strip().lower()
                if name == b"content-length":
                    length = int(value)
                elif name == b"transfer-encoding" and b"chunked" in value:
                    chunked = True
                elif name == b"connection" and value == b"close":
                    close = True
            payload = await self.read_chunked() if chunked else await self.reader.readexactly(length)
        except BaseException:
            self.close()
            raise
        if close:
            self.close()
        return status, payload

    async def read_chunked(self) -> bytes:
        assert self.reader is not None
        parts = []
        while size := int((await self.reader.readline()).split(b";")[0].strip() or b"0", 16):
            parts.append(await self.reader.readexactly(size))
            await self.reader.readline()
        while (await self.reader.readline()) not in (b"\r\n", b""):
            pass
        return b"".join(parts)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


@dataclass
class LoadResult:
    samples: list[Sample]
    window: Window
    problems: dict[str, int] = field(default_factory=dict)  # failure text -> count
    metrics_before: str = ""
    metrics_after: str = ""


class LoadDriver:
    """Sends one model's payloads to a TorchServe and records every request as a gate Sample."""

    def __init__(
        self, url: str, headers: dict[str, str], model: str, payloads: Payloads, load: LoadSpec
    ) -> None:
        parsed = urlparse(url)
        self.host, self.port = parsed.hostname or "127.0.0.1", parsed.port or 80
        self.model, self.payloads, self.load = model, payloads, load
        fixed = {"Host": f"{self.host}:{self.port}", **headers}
        self.bodies = [item.body for item in payloads.items]
        self.heads = [
            (
                f"POST {parsed.path} HTTP/1.1\r\n"
                + "".join(
                    f"{k}: {v}\r\n"
                    for k, v in {
                        **fixed,
                        "Content-Type": item.content_type,
                        "Content-Length": str(len(item.body)),
                    }.items()
                )
                + "\r\n"
            ).encode()
            for item in payloads.items
        ]
        self.samples: list[Sample] = []
        self.problems: dict[str, int] = {}
        self.idle: list[Connection] = []

    def fail(self, problem: str) -> None:
        key = problem[:80]
        self.problems[key] = self.problems.get(key, 0) + 1

    async def send(self, connection: Connection, index: int, due: float | None = None) -> None:
        """One request; in the open loop the latency counts from when it was due, so
        queueing in the client is not hidden (no coordinated omission)."""
        slot = index % len(self.heads)
        begin = time.perf_counter() if due is None else due
        sent_epoch = time.time() - (time.perf_counter() - begin)
        try:
            status, body = await asyncio.wait_for(
                connection.request(self.heads[slot], self.bodies[slot]), self.load.request_timeout_s
            )
            problem = self.payloads.check(status, body)
        except (TimeoutError, OSError, EOFError, ValueError, IndexError, asyncio.IncompleteReadError) as exc:
            connection.close()
            problem = f"{type(exc).__name__}: {exc}"[:80]
        self.samples.append(
            Sample(self.model, sent_epoch, 1000 * (time.perf_counter() - begin), problem is None)
        )
        if problem:
            self.fail(problem)

    def run(self, scrape: Callable[[], str]) -> LoadResult:
        """Warm-up, then the measured window; ``scrape`` reads the metrics at both ends of it."""
        return asyncio.run(self._run(scrape))

    async def _run(self, scrape: Callable[[], str]) -> LoadResult:
        load = self.load
        started = time.time()
        window = Window(started + load.warmup_s, started + load.warmup_s + load.measure_s)
        marks: dict[str, str] = {}

        async def scrape_at(moment: float, key: str) -> None:
            await asyncio.sleep(max(0.0, moment - time.time()))
            try:
                marks[key] = await asyncio.to_thread(scrape)
            except Exception as exc:  # a failed scrape only loses the mean batch size
                self.fail(f"metrics scrape: {type(exc).__name__}")

        scrapers = [
            asyncio.create_task(scrape_at(window.start, "before")),
            asyncio.create_task(scrape_at(window.end, "after")),
        ]
        if load.rate_rps:
            await self.open_loop(window.end)
        else:
            await self.closed_loop(window.end)
        await asyncio.gather(*scrapers)
        for connection in self.idle:
            connection.close()
        return LoadResult(
            self.samples, window, self.problems, marks.get("before", ""), marks.get("after", "")
        )

    async def closed_loop(self, end_epoch: float) -> None:
        async def user(offset: int) -> None:
            connection, index = Connection(self.host, self.port), offset
            try:
                while time.time() < end_epoch:
                    await self.send(connection, index)
                    index += 1
            finally:
                connection.close()

        await asyncio.gather(*(user(7 * i) for i in range(int(self.load.concurrency or 1))))

    async def open_loop(self, end_epoch: float) -> None:
        rng = random.Random(0)
        in_flight: set[asyncio.Task[None]] = set()
        due, index = time.perf_counter(), 0
        while time.time() < end_epoch:
            due += rng.expovariate(float(self.load.rate_rps or 1.0))
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            if len(in_flight) >= self.load.max_in_flight:  # due but the cap is full: failed, no latency
                self.samples.append(Sample(self.model, time.time(), None, False))
                self.fail("in-flight cap full")
                continue
            task = asyncio.create_task(self.pooled(index, due))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
            index += 1
        if in_flight:
            await asyncio.gather(*in_flight)

    async def pooled(self, index: int, due: float) -> None:
        connection = self.idle.pop() if self.idle else Connection(self.host, self.port)
        await self.send(connection, index, due)
        self.idle.append(connection)


# ---------------------------------------------------------------- one configuration
def settings_for(batch_size: int, delay_ms: int, workers: int) -> dict[str, int]:
    return {"batchSize": batch_size, "maxBatchDelay": delay_ms, "minWorkers": workers, "maxWorkers": workers}


class PointRunner:
    """Package, serve, load and measure one configuration of one model."""

    def __init__(
        self,
        spec: ModelSpec,
        manifest: Manifest,
        properties: Path,
        payloads: Payloads,
        load: LoadSpec,
        work_dir: Path,
        log_dir: Path,
        log: Callable[[str], None] = print,
    ) -> None:
        self.spec, self.manifest, self.properties, self.payloads = spec, manifest, properties, payloads
        self.load, self.work_dir, self.log_dir, self.log = load, work_dir, log_dir, log
        self.stopping: list[threading.Thread] = []

    def __call__(self, batch_size: int, delay_ms: int, workers: int) -> TunePoint:
        from tsbatch.build.package import package
        from tsbatch.client.process import start_instance

        model = self.spec.name
        point = TunePoint(model, batch_size, delay_ms, workers)
        settings = settings_for(batch_size, delay_ms, workers)
        point_dir = Path(
            tempfile.mkdtemp(prefix=f"{model}-{point.short_label.replace(' ', '-')}-", dir=self.work_dir)
        )
        started = time.perf_counter()
        server = None
        try:
            properties = point_dir / "config.properties"
            shutil.copy(self.properties, properties)
            update_model_settings(properties, model, settings)
            store = point_dir / "model-store"
            manifest = replace(self.manifest, model_store=store)
            with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
                package(self.spec, manifest, properties, force=True)
            server = start_instance(
                point_dir / "run",
                store,
                models=[model],
                source=self.properties,
                model_overrides={model: settings},
                timeout=180,
            )
            served = server.describe(model)[0]
            if (served.get("batchSize"), served.get("maxBatchDelay")) != (batch_size, delay_ms):
                raise RuntimeError(
                    f"TorchServe serves {served.get('batchSize')}/{served.get('maxBatchDelay')} instead"
                )
            driver = LoadDriver(
                f"{server.url('inference')}/predictions/{model}",
                server.headers("inference"),
                model,
                self.payloads,
                self.load,
            )
            result = driver.run(server.metrics_text)
            figures = measure(result.samples, model, result.window)
            point = replace(
                point,
                throughput_rps=figures.throughput_rps or 0.0,
                p50_ms=nan_if_none(figures.p50_ms),
                p95_ms=nan_if_none(figures.p95_ms),
                p99_ms=nan_if_none(figures.p99_ms),
                error_rate=figures.error_rate or 0.0,
                mean_batch_size=mean_formed_batch(result.metrics_before, result.metrics_after, model)
                if result.metrics_before and result.metrics_after
                else None,
                requests=figures.requests,
                seconds=round(time.perf_counter() - started, 1),
            )
            if result.problems:
                self.log(f"[tune]   failures: {result.problems}")
        except Exception as exc:  # a point that cannot run is reported; the search goes on
            message = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
            point = replace(point, failure=message, seconds=round(time.perf_counter() - started, 1))
            self.keep_log(point, server, exc)
        finally:
            self.retire(server, point_dir)
        self.log(describe_point(point))
        return point

    def retire(self, server: Any, point_dir: Path) -> None:
        """Stop a point's server in the background (the JVM takes seconds to exit) while
        the next point is packaged; :meth:`close` waits for every one of them."""

        def stop() -> None:
            try:
                if server is not None:
                    server.stop()
            finally:
                shutil.rmtree(point_dir, ignore_errors=True)

        thread = threading.Thread(target=stop, name=f"stop-{point_dir.name}")
        thread.start()
        self.stopping.append(thread)

    def close(self) -> None:
        for thread in self.stopping:
            thread.join()
        self.stopping.clear()

    def keep_log(self, point: TunePoint, server: Any, exc: BaseException) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        path = self.log_dir / f"{point.model}_{point.short_label.replace(' ', '_')}.log"
        tail = server.log_tail(80) if server is not None else ""
        path.write_text(f"{type(exc).__name__}: {exc}\n\n{tail}\n")


def nan_if_none(value: float | None) -> float:
    return math.nan if value is None else float(value)


def describe_point(point: TunePoint) -> str:
    if point.failure:
        return f"[tune] {point.model} {point.short_label:<12} FAILED {point.failure} ({point.seconds:.0f} s)"
    batch = "-" if point.mean_batch_size is None else f"{point.mean_batch_size:.2f}"
    return (
        f"[tune] {point.model} {point.short_label:<12} {point.throughput_rps:7.1f} rps  p50 {point.p50_ms:6.0f}  "
        f"p95 {point.p95_ms:6.0f}  p99 {point.p99_ms:6.0f} ms  errors {point.error_rate:6.2%}  "
        f"mean batch {batch:>5}  ({point.requests} req, {point.seconds:.0f} s)"
    )


# ---------------------------------------------------------------- search
@dataclass
class SearchLog:
    points: list[TunePoint] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)


def search(
    model: str,
    sla: Sla,
    space: SearchSpace,
    load: LoadSpec,
    run_point: Callable[[int, int, int], TunePoint],
    log: Callable[[str], None] = print,
) -> SearchLog:
    """Batch 1 per worker count, then per (workers, delay) lane growing batch sizes until
    the pruning rules say stop. Points are measured once and shared between lanes."""
    result = SearchLog()
    delays, dropped_delays = allowed_delays(space.delays_ms, sla)
    if dropped_delays:
        result.pruned.append(
            f"delays {dropped_delays} ms never tried: over half the p99 ceiling ({sla.p99_ms:g} ms)"
        )
    if not delays:
        delays = [0]
    sizes, dropped_sizes = reachable_batch_sizes(
        space.batch_sizes, None if load.rate_rps else load.concurrency
    )
    if dropped_sizes:
        result.pruned.append(
            f"batch sizes {dropped_sizes} never tried: above the concurrency ({load.concurrency})"
        )
    measured: dict[tuple[int, int, int], TunePoint] = {}

    def run(batch_size: int, delay: int, workers: int) -> TunePoint:
        key = (batch_size, delay, workers)
        if key not in measured:
            measured[key] = run_point(batch_size, delay, workers)
            result.points.append(measured[key])
        return measured[key]

    for workers in space.workers:
        base = run(1, delays[0], workers) if 1 in sizes else None  # at batch 1 the delay never applies
        for delay in delays:
            lane = [base] if base is not None else []
            for batch_size in (b for b in sizes if b > 1):
                shorter = [
                    measured[(batch_size, d, workers)]
                    for d in delays
                    if d < delay and (batch_size, d, workers) in measured
                ]
                pointless = next((why for p in shorter if (why := longer_delay_pointless(p))), None)
                if pointless:  # the same batches would form: the shorter delay's point stands in
                    result.pruned.append(f"{model} b{batch_size} d{delay} w{workers} skipped: {pointless}")
                    log(f"[tune] skip b{batch_size} d{delay} w{workers}: {pointless}")
                    lane.append(shorter[-1])
                else:
                    lane.append(run(batch_size, delay, workers))
                why = stop_growing_batch(lane, sla, space.min_gain)
                if why:
                    rest = [b for b in sizes if b > batch_size]
                    if rest:
                        result.pruned.append(
                            f"{model} w{workers} d{delay}: batch sizes {rest} skipped: {why}"
                        )
                        log(f"[tune] pruned {rest} for w{workers} d{delay}: {why}")
                    break
    return result


# ---------------------------------------------------------------- reports
CSV_FIELDS = [f.name for f in fields(TunePoint)] + ["meets_sla", "winner", "verdict"]


def write_points_csv(selection: Selection, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for verdict in selection.verdicts:
            values = {k: ("" if v is None else v) for k, v in asdict(verdict.point).items()}
            writer.writerow(
                {**values, "meets_sla": verdict.meets_sla, "winner": verdict.won, "verdict": verdict.reason}
            )


def read_points_csv(path: Path) -> list[TunePoint]:
    """The points back from a tune CSV (the plot is drawn from these)."""
    types = {f.name: str(f.type) for f in fields(TunePoint)}
    points = []
    with path.open(newline="") as handle:
        for raw in csv.DictReader(handle):
            values: dict[str, Any] = {}
            for key, kind in types.items():
                text = raw[key]
                if kind == "int":
                    values[key] = int(text)
                elif "float" in kind:
                    values[key] = float(text) if text != "" else None
                else:
                    values[key] = text or None
            points.append(TunePoint(**values))
    return points


@dataclass
class ModelReport:
    model: str
    sla: Sla
    selection: Selection
    baseline: TunePoint | None
    pruned: list[str]
    csv_path: Path
    plot_path: Path
    current: dict[str, Any]  # the model's settings in config.properties before tuning

    @property
    def ratio(self) -> float | None:
        winner = self.selection.winner
        if winner is None or self.baseline is None or self.baseline.throughput_rps <= 0:
            return None
        return winner.throughput_rps / self.baseline.throughput_rps


def report_model(
    model: str,
    points: Sequence[TunePoint],
    sla: Sla,
    out_dir: Path,
    pruned: Sequence[str],
    current: dict[str, Any],
) -> ModelReport:
    """CSV of every point with its verdict, then the plot drawn from that CSV read back."""
    from tsbatch.analysis.plots import plot_tune

    csv_path = out_dir / f"{model}.csv"
    write_points_csv(select_configuration(points, sla), csv_path)
    selection = select_configuration(read_points_csv(csv_path), sla)
    plot_path = plot_tune(
        selection, out_dir / f"{model}.png", f"{model}: throughput vs p99 ({sla.profile} SLA)"
    )
    return ModelReport(
        model,
        sla,
        selection,
        batch_one_baseline([v.point for v in selection.verdicts], sla),
        list(pruned),
        csv_path,
        plot_path,
        current,
    )


def recommended_entry(properties: Path, reports: Sequence[ModelReport]) -> str:
    """The ``models=`` entry of ``properties`` with every winner applied (file untouched)."""
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "config.properties"
        shutil.copy(properties, copy)
        for report in reports:
            if report.selection.winner is not None:
                update_model_settings(copy, report.model, winner_settings(report.selection.winner))
        text = copy.read_text()
    lines = text.splitlines(keepends=True)
    entry = next(e for e in parse_entries(text) if e.key == "models")
    return "".join(lines[entry.first_line : entry.last_line + 1])


def winner_settings(point: TunePoint) -> dict[str, int]:
    return settings_for(point.batch_size, point.max_batch_delay_ms, point.workers)


def render_summary(reports: Sequence[ModelReport], meta: dict[str, Any], entry: str) -> str:
    lines = [
        "# Batch tuning through TorchServe",
        "",
        f"- load: {meta['load']}; warm-up {meta['warmup_s']:g} s, measured {meta['measure_s']:g} s per configuration",
        f"- SLA profile `{meta['profile']}` from {meta['sla_file']}; percentiles are nearest-rank over every request "
        "sent in the measured window (failed ones included)",
        "- mean batch = rate of BatchedRequestsTotal over BatchesTotal at the metrics endpoint during the window",
        f"- load generator, TorchServe and its workers share this machine ({meta['cpus']} CPUs); "
        f"tuned in {meta['seconds']:.0f} s",
        "- at batch size 1 the batch delay never applies (a batch of one is sent at once)",
    ]
    for report in reports:
        sla, selection = report.sla, report.selection
        lines += ["", f"## {report.model}", ""]
        lines.append(
            f"SLA ({sla.profile}): p50 <= {sla.p50_ms:g} ms, p95 <= {sla.p95_ms:g} ms, p99 <= {sla.p99_ms:g} ms, "
            f"errors <= {sla.max_error_rate:.2%}, throughput >= {sla.min_throughput_rps:g} rps"
        )
        lines.append("")
        lines.append(f"**{selection.message}**")
        if selection.winner is not None:
            baseline = report.baseline
            if baseline is not None and report.ratio is not None:
                lines.append(
                    f"\n{report.ratio:.2f}x the throughput of the best batch-size-1 configuration meeting the same SLA "
                    f"({baseline.short_label}: {baseline.throughput_rps:.1f} rps, p99 {baseline.p99_ms:.0f} ms)."
                )
            else:
                lines.append(
                    "\nNo batch-size-1 configuration met the SLA: batching is what makes it reachable."
                )
            current = {k: report.current.get(k) for k in TUNED_KEYS}
            lines.append(
                f"\nconfig.properties now: {current}; recommended: {winner_settings(selection.winner)}"
            )
        lines += [
            "",
            f"![{report.model}]({report.plot_path.name})",
            "",
            "| batchSize | maxBatchDelay ms | workers | throughput rps | p50 ms | p95 ms | p99 ms | errors | mean batch | verdict |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for verdict in selection.verdicts:
            p = verdict.point
            batch = "-" if p.mean_batch_size is None else f"{p.mean_batch_size:.2f}"
            mark = "**winner** - " if verdict.won else ""
            lines.append(
                f"| {p.batch_size} | {p.max_batch_delay_ms} | {p.workers} | {p.throughput_rps:.1f} | {p.p50_ms:.0f} | "
                f"{p.p95_ms:.0f} | {p.p99_ms:.0f} | {p.error_rate:.2%} | {batch} | {mark}{verdict.reason} |"
            )
        if report.pruned:
            lines += ["", "Pruned:"] + [f"- {why}" for why in report.pruned]
    lines += [
        "",
        "## Recommended `models=` entry for config.properties",
        "",
        "```properties",
        entry.rstrip("\n"),
        "```",
        "",
    ]
    return "\n".join(lines)


def print_verdicts(report: ModelReport, log: Callable[[str], None] = print) -> None:
    log(f"[tune] {report.selection.message}")
    for verdict in report.selection.verdicts:
        mark = "WINNER" if verdict.won else "lost  "
        log(f"[tune]   {mark} {verdict.point.short_label:<12} {verdict.reason}")
    if report.ratio is not None and report.baseline is not None:
        log(
            f"[tune]   {report.ratio:.2f}x batch size 1 at the same SLA ({report.baseline.short_label}: {report.baseline.throughput_rps:.1f} rps)"
        )


def finish(
    reports: Sequence[ModelReport],
    out_dir: Path,
    meta: dict[str, Any],
    properties: Path,
    apply_to: Path | None,
    log: Callable[[str], None] = print,
) -> int:
    """Write summary.md and recommended.properties, apply the winners if asked; the exit code."""
    entry = recommended_entry(properties, reports)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "recommended.properties").write_text(
        "# Written by `make tune`: the models= entry of config.properties with the winning settings.\n"
        + entry
    )
    (out_dir / "summary.md").write_text(render_summary(reports, meta, entry))
    for report in reports:
        print_verdicts(report, log)
    losers = [r.model for r in reports if r.selection.winner is None]
    if apply_to is not None:
        for report in reports:
            if report.selection.winner is not None:
                update_model_settings(apply_to, report.model, winner_settings(report.selection.winner))
                log(f"[tune] applied {report.model} {winner_settings(report.selection.winner)} to {apply_to}")
        log("[tune] rebuild the archives with `make archive` (TorchServe lets the archive's settings win)")
    log(f"[tune] recommended models= entry:\n{entry}")
    log(
        f"[tune] reports in {out_dir}: summary.md, recommended.properties, "
        + ", ".join(f"{r.model}.csv/.png" for r in reports)
    )
    if losers:
        log(f"[tune] FAILED: no configuration meets the SLA for {losers}; nothing applied for them")
        return 2
    return 0


# ---------------------------------------------------------------- CLI
def display_path(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def parse_ints(text: str) -> list[int]:
    return sorted({int(part) for part in text.split(",") if part.strip()})


def default_workers(properties: Path, model: str) -> list[int]:
    """1 up to the worker count that fills the CPUs at the configured torchThreads (max 4)."""
    threads = int(model_settings(read_properties(properties)).get(model, {}).get("torchThreads", 1) or 1)
    most = max(1, min(4, (os.cpu_count() or 1) // max(1, threads)))
    return sorted({1, most})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", action="append", help="model to tune (default: every manifest model)")
    parser.add_argument(
        "--quick", action="store_true", help="3 short points, 1 worker: a smoke run for tests"
    )
    parser.add_argument("--profile", help="SLA profile (default: $SLA_PROFILE, then the file's default)")
    parser.add_argument("--sla-file", type=Path, help="SLA file (default: loadtest/sla.yaml)")
    parser.add_argument("--batch-sizes", type=parse_ints)
    parser.add_argument("--delays", type=parse_ints, help="maxBatchDelay values in ms")
    parser.add_argument("--workers", type=parse_ints)
    parser.add_argument(
        "--concurrency", type=int, help="closed loop: requests in flight (default 8, like `make loadtest`)"
    )
    parser.add_argument(
        "--rate", type=float, help="open loop: arrival rate in req/s (instead of --concurrency)"
    )
    parser.add_argument("--warmup-s", type=float)
    parser.add_argument("--measure-s", type=float)
    parser.add_argument(
        "--min-gain", type=float, help="a bigger batch must add this share of throughput (0.05)"
    )
    parser.add_argument(
        "--properties", type=Path, default=DEFAULT_PROPERTIES, help="config.properties to start from"
    )
    parser.add_argument("--apply", nargs="?", type=Path, const=DEFAULT_PROPERTIES, metavar="PATH",
                        help="write the winners into PATH (default config.properties), keeping its comments")  # fmt: skip
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--build-dir", type=Path, help="where the exported models are (default: build/)")
    args = parser.parse_args(argv)

    base_space, base_load = (QUICK_SPACE, QUICK_LOAD) if args.quick else (FULL_SPACE, LoadSpec())
    load = LoadSpec(
        concurrency=None if args.rate else (args.concurrency or base_load.concurrency),
        rate_rps=args.rate,
        warmup_s=args.warmup_s if args.warmup_s is not None else base_load.warmup_s,
        measure_s=args.measure_s if args.measure_s is not None else base_load.measure_s,
    )
    manifest = load_manifest(build_dir=args.build_dir)
    names = args.model or list(manifest.models)
    sla_kwargs = {"path": args.sla_file} if args.sla_file else {}
    try:
        slas = {name: load_sla(name, args.profile, **sla_kwargs) for name in names}
        specs = {name: manifest.model(name) for name in names}
        current = model_settings(read_properties(args.properties))
    except ValueError as exc:
        print(f"[tune] FAILED: {exc}", file=sys.stderr)
        return 1
    unbuilt = [n for n, s in specs.items() if not (s.artifact_dir / "model.pt").exists()]
    if unbuilt:
        print(f"[tune] FAILED: {unbuilt} not exported; run `make archive` first", file=sys.stderr)
        return 1
    if shutil.which("java") is None:
        print("[tune] FAILED: TorchServe needs Java 17 (`make java`)", file=sys.stderr)
        return 1

    started = time.perf_counter()
    reports = []
    work_root = Path(tempfile.mkdtemp(prefix="tune-"))
    try:
        for name in names:
            spec, sla = specs[name], slas[name]
            space = SearchSpace(
                batch_sizes=args.batch_sizes or base_space.batch_sizes,
                delays_ms=args.delays or base_space.delays_ms,
                workers=args.workers
                or (base_space.workers if args.quick else default_workers(args.properties, name)),
                min_gain=args.min_gain if args.min_gain is not None else base_space.min_gain,
            )
            print(
                f"[tune] {name}: batch sizes {space.batch_sizes} x delays {space.delays_ms} ms x workers {space.workers}, "
                f"{load.describe()}, SLA {sla.profile} p99 <= {sla.p99_ms:g} ms"
            )
            runner = PointRunner(
                spec, manifest, args.properties, payloads_for(spec), load, work_root, args.out / "logs"
            )
            try:
                outcome = search(name, sla, space, load, runner)
            finally:
                runner.close()  # no server outlives its model's search
            report = report_model(name, outcome.points, sla, args.out, outcome.pruned, current.get(name, {}))
            reports.append(report)
    finally:
        shutil.rmtree(work_root, ignore_errors=True)
    meta = {
        "load": load.describe(),
        "warmup_s": load.warmup_s,
        "measure_s": load.measure_s,
        "profile": reports[0].sla.profile if reports else "?",
        "sla_file": display_path(args.sla_file or DEFAULT_SLA_FILE),
        "cpus": os.cpu_count(),
        "seconds": time.perf_counter() - started,
    }
    code = finish(reports, args.out, meta, args.properties, args.apply)
    print(f"[tune] done in {meta['seconds']:.0f} s")
    return code


if __name__ == "__main__":
    sys.exit(main())
