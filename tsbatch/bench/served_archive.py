"""Benchmark: the served throughput of any archive (``--mar``) under the user's requests.

The archive is served as packaged, or with ``--batch-size``/``--delay``/``--workers`` written
into its model-config.yaml (as the tuner does per point), on a private TorchServe; the
load client sends ``--requests`` (or, for a toolkit model, its own pool) from
``--clients`` closed-loop users and prints throughput, exact percentiles, the error rate
and the mean batch the frontend formed where the handler reports it. ``make bench`` reaches
it through ``tsbatch.bench.resnet`` when given ``--mar``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from tsbatch.analysis.tune.mar import MarError, read_mar
from tsbatch.analysis.tune.point import MarPointRunner
from tsbatch.archive.traffic import traffic_for
from tsbatch.client.load import LoadSpec
from tsbatch.paths import DEFAULT_PROPERTIES
from tsbatch.settings.batch import BatchSettings
from tsbatch.workloads.requests_files import add_requests_options, parse_requests_specs


def add_archive_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mar", type=Path, help="benchmark this archive served (any handler)")
    add_requests_options(parser)


def bench_archive(args: argparse.Namespace) -> int:
    """One served run of ``args.mar``; 1 when a request failed or nothing completed."""
    try:
        info = read_mar(args.mar)
        requests = parse_requests_specs(args.requests, info.model)
        workload = traffic_for(
            info.model, requests=requests.get(info.model), answer_schema=args.answer_schema
        )
    except (MarError, ValueError, OSError) as exc:
        print(f"[bench] FAILED: {exc}", file=sys.stderr)
        return 1
    own = info.settings
    settings = BatchSettings.for_point(
        args.batch_size or own.batch_size,
        own.max_batch_delay_ms if args.delay is None else args.delay,
        args.workers or own.max_workers or 1,
    )
    load = LoadSpec(concurrency=args.clients, warmup_s=args.warmup, measure_s=args.duration)
    print(f"[bench] {info.model} from {args.mar}: {workload.source}, {load.describe()}")
    work = Path(tempfile.mkdtemp(prefix="bench-archive-"))
    runner = MarPointRunner(info, DEFAULT_PROPERTIES, workload, load, work, work / "logs")
    try:
        point = runner(settings)  # prints its row
    finally:
        runner.close()
        shutil.rmtree(work, ignore_errors=True)
    return 1 if point.failure or point.error_rate > 0 or not point.requests else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Serve any archive with your requests and print its throughput and latency "
        "percentiles under concurrent clients."
    )
    add_archive_options(parser)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration", type=float, default=20.0, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--batch-size", type=int, help="default: the archive's")
    parser.add_argument("--delay", type=int, help="maxBatchDelay in ms (default: the archive's)")
    parser.add_argument("--workers", type=int, help="default: the archive's maxWorkers")
    args = parser.parse_args(argv)
    if args.mar is None:
        parser.error("--mar is required")
    return bench_archive(args)
