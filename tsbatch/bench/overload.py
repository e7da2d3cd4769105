"""Benchmark: the image classifier (`--model`, default the first image model) past its
capacity, with deadline shedding off and on.

Served at the production shape (224x224 photos, random weights, TorchScript fp32: timing
only), the model's capacity is found first: the most requests per second a closed loop
gets answered with its p99 inside the target (``--clients``, halved until it is; what
TorchServe computes per second past that is answered too late to count). Then Poisson
arrivals (``tsbatch.client.load``'s open loop) are offered at multiples of it. Each load
runs twice: without a deadline header, and with each request carrying its due time plus
the p99 target (``X-Request-Deadline-Ms``, built per request when it is sent), so the
batch core sheds what cannot be answered in time (``batchkit.deadlines``).

Per row: the offered rate, the goodput (answers 200 within the p99 target, per second),
the p99 of the answers that were served, the requests shed (503 ``deadline_exceeded``)
and those the frontend refused with its queue full (503 "has no worker"). Without
shedding, past capacity the queue fills and every answer waits its drain time; with it,
the worker spends its time only on requests that can still be answered in time.

Last, under steady load from a few clients, a new batch size is applied live
(``tsbatch.server.apply``: a staged version, then the switch): the requests failed during
the switch and how long it took.

    tsbatch bench overload --p99-ms 300 --seconds 20
    tsbatch bench overload --quick          # seconds per row, for a smoke run
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from batchkit.deadlines import DEADLINE_HEADER
from batchkit.errors import DeadlineExceeded
from tsbatch.archive.manifest import Manifest, ManifestError, load_manifest
from tsbatch.archive.package import private_store
from tsbatch.bench.model_option import add_model_option, chosen_model
from tsbatch.bench.resnet import imagenet_spec
from tsbatch.client.load import BackgroundLoad, LoadDriver, LoadResult, LoadSpec, PerRequestHeaders, Record
from tsbatch.config.properties import configured_settings, read_properties
from tsbatch.kinds.image.examples import request_pictures
from tsbatch.paths import DEFAULT_PROPERTIES
from tsbatch.server.apply import ApplyError, apply_settings
from tsbatch.server.process import TorchServe, start_instance
from tsbatch.settings.batch import ARCHIVE_KEYS, BatchSettings
from tsbatch.sla.gate import Window
from tsbatch.sla.percentile import percentile
from tsbatch.sla.profiles import load_sla
from tsbatch.workloads.payloads import Payload

MULTIPLES = (0.5, 1.0, 1.5, 2.0)
SHED_MARK = f'"{DeadlineExceeded.code}"'.encode()  # in the body of the batch core's 503


@dataclass(frozen=True)
class Row:
    """One open-loop run: what was offered and what came back within the window."""

    multiple: float  # of the measured capacity
    shedding: bool
    offered_rps: float
    goodput_rps: float  # answers 200 within the p99 target, per second
    served_p99_ms: float | None  # of the 200 answers; None when none came
    served: int
    shed: int  # 503 deadline_exceeded from the batch core
    queue_full: int  # 503 from the frontend: its job queue was full
    other: int  # any other failure (timeouts, errors)


def row_of(records: Sequence[Record], window: Window, multiple: float, shedding: bool, p99_ms: float) -> Row:
    """The row of the requests sent inside ``window``."""
    sent = [record for record in records if window.contains(record.start)]
    served = [r.response_time_ms for r in sent if r.status == 200 and r.response_time_ms is not None]
    shed = sum(r.status == 503 and SHED_MARK in r.body for r in sent)
    queue_full = sum(r.status == 503 and SHED_MARK not in r.body for r in sent)
    seconds = window.seconds or 1.0
    return Row(
        multiple=multiple,
        shedding=shedding,
        offered_rps=len(sent) / seconds,
        goodput_rps=sum(latency <= p99_ms for latency in served) / seconds,
        served_p99_ms=percentile(served, 99) if served else None,
        served=len(served),
        shed=shed,
        queue_full=queue_full,
        other=len(sent) - len(served) - shed - queue_full,
    )


def render_rows(rows: Sequence[Row], capacity_rps: float, p99_ms: float) -> list[str]:
    """The table, one line per row, and the verdict of the heaviest load with shedding on."""
    lines = [
        f"{'load':>5} {'shedding':>8} {'offered/s':>10} {'goodput/s':>10} {'served p99 ms':>14} "
        f"{'served':>7} {'shed 503':>9} {'queue-full 503':>15} {'other':>6}"
    ]
    for row in rows:
        p99 = "-" if row.served_p99_ms is None else f"{row.served_p99_ms:.0f}"
        lines.append(
            f"{row.multiple:>4g}x {'on' if row.shedding else 'off':>8} {row.offered_rps:>10.1f} "
            f"{row.goodput_rps:>10.1f} {p99:>14} {row.served:>7d} {row.shed:>9d} {row.queue_full:>15d} {row.other:>6d}"
        )
    heaviest = max((row for row in rows if row.shedding), key=lambda row: row.multiple, default=None)
    if heaviest is not None and capacity_rps > 0:
        p99 = "no answer" if heaviest.served_p99_ms is None else f"served p99 {heaviest.served_p99_ms:.0f} ms"
        lines.append(
            f"at {heaviest.multiple:g}x with shedding: goodput {heaviest.goodput_rps / capacity_rps:.2f}x capacity, "
            f"{p99} (target {p99_ms:g} ms)"
        )
    return lines


def deadline_headers(model: str, p99_ms: float) -> PerRequestHeaders:
    """The per-request header: the request's due time plus the p99 target (``Sla.deadline_ms``)."""
    sla = replace(load_sla(model), p99_ms=p99_ms)
    return lambda due_epoch: {DEADLINE_HEADER: f"{sla.deadline_ms(due_epoch):.0f}"}


def open_loop_row(
    server: TorchServe,
    bodies: list[bytes],
    rate_rps: float,
    multiple: float,
    shedding: bool,
    args: argparse.Namespace,
) -> Row:
    driver = LoadDriver(
        f"{server.url('inference')}/predictions/{args.model}",
        bodies,
        headers=server.client.headers(),
        per_request=deadline_headers(args.model, args.p99_ms) if shedding else None,
        max_in_flight=4096,
    )
    result = driver.run(LoadSpec(rate_rps=rate_rps, warmup_s=args.warmup, measure_s=args.seconds))
    return row_of(result.records, result.window, multiple, shedding, args.p99_ms)


def sla_capacity(
    url: str, bodies: list[bytes], headers: dict[str, str], args: argparse.Namespace
) -> tuple[int, LoadResult]:
    """The closed loop at the most clients (``--clients``, halved) whose p99 meets the target;
    at one client, whatever it is."""
    clients = max(args.clients, 1)
    while True:
        print(f"[bench] capacity: closed loop of {clients} clients ...")
        result = LoadDriver(url, bodies, headers=headers).run(
            LoadSpec(clients, warmup_s=args.warmup, measure_s=min(args.seconds, 10.0))
        )
        p99 = result.figures().p99_ms
        if clients == 1 or (p99 is not None and p99 <= args.p99_ms):
            return clients, result
        print(f"[bench]   p99 {p99:.0f} ms is past the {args.p99_ms:g} ms target: fewer clients")
        clients //= 2


def live_apply(
    server: TorchServe, manifest: Manifest, bodies: list[bytes], batch_size: int, args: argparse.Namespace
) -> list[str]:
    """A new batch size applied under four clients' steady load: its report lines."""
    current = BatchSettings.described(server.client.describe(args.model))
    wanted = current.changed(batch_size=args.apply_batch_size or max(1, batch_size // 2))
    driver = LoadDriver(
        f"{server.url('inference')}/predictions/{args.model}", bodies, headers=server.client.headers()
    )
    probe = Payload(bodies[0], "image/jpeg", "the bench's first photo")
    with BackgroundLoad(driver, users=4) as load:
        time.sleep(2)
        started = time.time()
        try:
            report = apply_settings(
                server, args.model, wanted, manifest=manifest, probe=probe, log=lambda _: None
            )
        except ApplyError as exc:
            return [f"live apply of batchSize {wanted.batch_size} failed: {exc}"]
        switched = time.time()
        time.sleep(2)
    during = [r for r in load.records if started <= r.start <= switched]
    failed = [r for r in load.records if r.status != 200]
    described = BatchSettings.described(server.client.describe(args.model))
    steps = ", ".join(f"{step.name.lower()} {seconds:.1f}s" for step, seconds in report.timings.items())
    return [
        f"live apply under 4 clients: batchSize {current.batch_size} -> {described.batch_size} "
        f"(version {report.version}) in {switched - started:.1f} s ({steps})",
        f"requests during the switch: {len(during)}, failed: {sum(r in failed for r in during)}; "
        f"failed in the whole run: {len(failed)} of {len(load.records)}",
    ]


def settings_from(args: argparse.Namespace) -> BatchSettings:
    """The model's settings in config.properties, with the options' changes."""
    configured = configured_settings(read_properties(DEFAULT_PROPERTIES), args.model)
    return configured.changed(batch_size=args.batch_size)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Serve the image classifier at 224x224, find its capacity, then offer 0.5x to 2x of it as "
        "Poisson arrivals with deadline shedding off and on: goodput, served p99, shed and queue-full counts."
    )
    parser.add_argument(
        "--p99-ms", type=float, default=300.0, help="the p99 target; deadlines are due time + this"
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per row")
    parser.add_argument(
        "--warmup", type=float, default=5.0, help="seconds of load before each measured window"
    )
    parser.add_argument("--clients", type=int, default=16, help="closed-loop clients that find the capacity")
    parser.add_argument("--batch-size", type=int, help="default: config.properties'")
    parser.add_argument("--job-queue-size", type=int, help="default: config.properties' job_queue_size")
    parser.add_argument("--quick", action="store_true", help="3 s rows after 2 s of warm-up, 1x and 2x only")
    parser.add_argument(
        "--apply-batch-size",
        type=int,
        help="the batch size applied live at the end (default: half the served)",
    )
    add_model_option(parser, "image")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    manifest = load_manifest()
    try:
        args.model = chosen_model(args.model, "image", manifest)
    except ManifestError as exc:
        parser.error(str(exc))
    multiples = (1.0, 2.0) if args.quick else MULTIPLES
    if args.quick:
        args.seconds, args.warmup = 3.0, 2.0
    settings = settings_from(args)
    # Model registration on (this private loopback server only): the live apply stages a version.
    extra = {"enable_model_api": "true"}
    if args.job_queue_size is not None:
        extra["job_queue_size"] = str(args.job_queue_size)
    queue = extra.get("job_queue_size") or read_properties(DEFAULT_PROPERTIES).get("job_queue_size", "100")

    with tempfile.TemporaryDirectory(prefix="bench-overload-") as tmp:
        work = Path(tmp)
        print(f"[bench] exporting {args.model} at 224x224 (random weights, TorchScript) ...")
        spec = imagenet_spec(manifest.model(args.model), work, compiled=False)
        private = Manifest(
            models={args.model: spec}, build_dir=spec.build_dir, model_store=manifest.model_store
        )
        properties, store = private_store(
            work / "store", [args.model], {args.model: settings.entry(ARCHIVE_KEYS)}, extra, manifest=private
        )
        server = start_instance(work / "run", store, [args.model], source=properties)
        bodies = request_pictures(64, "imagenet")
        try:
            url = f"{server.url('inference')}/predictions/{args.model}"
            clients, capacity = sla_capacity(url, bodies, server.client.headers(), args)
            capacity_rps = capacity.figures().throughput_rps or 0.0
            rows = []
            for multiple in multiples:
                for shedding in (False, True):
                    print(
                        f"[bench] {multiple:g}x capacity ({multiple * capacity_rps:.1f} req/s), shedding {shedding} ..."
                    )
                    rows.append(
                        open_loop_row(server, bodies, multiple * capacity_rps, multiple, shedding, args)
                    )
            print("[bench] applying a new batch size live under steady load ...")
            applied = live_apply(server, private, bodies, settings.batch_size, args)
        finally:
            server.stop()

    print(
        f"\n{args.model} 224x224 past capacity (batchSize={settings.batch_size}, "
        f"maxBatchDelay={settings.max_batch_delay_ms} ms, workers={settings.max_workers}, "
        f"torchThreads={settings.torch_threads}, job_queue_size={queue}, p99 target {args.p99_ms:g} ms, "
        f"{args.seconds:g} s per row)"
    )
    figures = capacity.figures()
    p99 = "n/a" if figures.p99_ms is None else f"{figures.p99_ms:.0f} ms"
    print(
        f"capacity: {capacity_rps:.1f} req/s with p99 {p99} "
        f"({clients} clients, closed loop: the most that meets the target)"
    )
    for line in render_rows(rows, capacity_rps, args.p99_ms):
        print(line)
    for line in applied:
        print(line)
    return 1 if not capacity_rps or any(row.other for row in rows) or "failed" in applied[0] else 0
