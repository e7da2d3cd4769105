"""SLA-driven batch tuner through a real TorchServe (``make tune``).

For each model it searches batchSize x maxBatchDelay x worker count. Every setting tried
gets its own archive (TorchServe lets the archive's model-config.yaml win over
config.properties, so the setting must be packaged in), registered in turn on one private
TorchServe per model (free loopback ports, token auth on; fresh workers at every point, one
JVM start per search: :mod:`tsbatch.analysis.tune.point`). The load client then
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

    tsbatch tune                        # every model, cpu profile here
    tsbatch tune --model resnet18 --quick
    tsbatch tune --apply                # write the winners into config.properties
    tsbatch tune --apply-live           # and serve them on the running `tsbatch serve` (tsbatch apply)
    tsbatch tune --mar my_model.mar --requests my_requests/ --p99-ms 500

``--mar`` tunes any archive, whoever built it: each point rewrites the model-config.yaml
inside a copy of it (handler and files as they are), and ``--requests`` (a folder of bodies
or a .jsonl, see docs/loadtest.md) is what the load sends; any 2xx answer passes unless
``--answer-schema`` says more. The winner is printed as its own ``models=`` entry and its
archive is written beside the reports.

Exit status: 0 when every model has a winner, 2 when some model has no configuration
meeting its SLA (the report says so), 1 on errors.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from batchkit.candidates import ServingCandidate
from image_serving.pool import AUTO
from tsbatch.analysis.options import decode_threads_list, int_list
from tsbatch.analysis.tune.mar import MarInfo, models_entry_base, read_mar, repackage
from tsbatch.analysis.tune.point import EveryPointFails, ManifestPointRunner, MarPointRunner, PointRunner
from tsbatch.analysis.tune.report import ModelReport, finish, recommended_settings, report_model
from tsbatch.analysis.tune.search import (
    DECODE_THREADS,
    FULL_LOAD,
    FULL_SPACE,
    QUICK_LOAD,
    QUICK_SPACE,
    SearchSpace,
    pools_text,
    search,
)
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import Manifest, load_manifest
from tsbatch.archive.traffic import Traffic, traffic_for
from tsbatch.archive.variants import default_variant, variant_spec
from tsbatch.client.load import LoadSpec
from tsbatch.config.properties import configured_settings, model_settings, read_properties
from tsbatch.paths import DEFAULT_PROPERTIES, DEFAULT_SLA_FILE, REPO_ROOT, TUNE_DIR
from tsbatch.server.apply import ApplyError, apply_settings
from tsbatch.server.process import TorchServe
from tsbatch.settings.batch import BatchSettings
from tsbatch.sla.profiles import Sla, add_target_options, option_targets, slas_for
from tsbatch.workloads.requests_files import add_requests_options, parse_requests_specs


def display_path(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def default_workers(properties: Path, model: str) -> list[int]:
    """1 up to the worker count that fills the CPUs at the configured torchThreads (max 4)."""
    threads = configured_settings(read_properties(properties), model).torch_threads or 1
    most = max(1, min(4, (os.cpu_count() or 1) // threads))
    return sorted({1, most})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Find the batchSize, maxBatchDelay and worker count with the most throughput that "
        "meets your latency SLA, measured through a real TorchServe per setting. Exits 0 when every "
        "model has a winner, 2 when one has none, 1 on errors.",
    )
    parser.add_argument("--model", action="append", help="model to tune (default: every manifest model)")
    parser.add_argument("--mar", type=Path, help="tune this archive (any handler) instead of manifest models")
    add_requests_options(parser)
    parser.add_argument(
        "--quick", action="store_true", help="3 short points, 1 worker: a smoke run for tests"
    )
    parser.add_argument("--profile", help="SLA profile (default: $SLA_PROFILE, then the file's default)")
    parser.add_argument("--sla-file", type=Path, help="SLA file (default: loadtest/sla.yaml)")
    add_target_options(parser)
    parser.add_argument("--batch-sizes", type=int_list)
    parser.add_argument("--delays", type=int_list, help="maxBatchDelay values in ms")
    parser.add_argument("--workers", type=int_list)
    parser.add_argument(
        "--decode-threads",
        type=decode_threads_list,
        help="image models: decode pools tried at the best point, e.g. auto,1,2 (default auto, 1 and "
        "every core; none with --quick); pass --requests with your photos so the pool is sized for them",
    )
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
    parser.add_argument("--apply-live", nargs="?", type=Path, const=REPO_ROOT / ".serve", metavar="RUN_DIR",
                        help="also serve the winners on the running server of RUN_DIR (default .serve) with "
                        "`tsbatch apply`, no request failed, and write them into config.properties")  # fmt: skip
    parser.add_argument("--out", type=Path, default=TUNE_DIR)
    parser.add_argument("--build-dir", type=Path, help="where the exported models are (default: build/)")
    parser.add_argument(
        "--variant",
        type=parse_variant,
        help="the serving candidate at every point, e.g. torchscript-fp32, aoti-cpu-fp32 or aoti-cpu-int8 "
        "(default: what the planner chooses on this machine)",
    )
    return parser


def parse_variant(text: str) -> ServingCandidate:
    try:
        return ServingCandidate.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


@dataclass
class TuningRun:
    """What the run tunes: each model's SLA, workload, settings today and how its points run."""

    names: list[str]
    slas: dict[str, Sla]
    workloads: dict[str, Traffic]
    current: dict[str, BatchSettings]
    manifest: Manifest | None = None  # manifest models
    mar: MarInfo | None = None  # or one archive (--mar)


def tuning_run(args: argparse.Namespace) -> TuningRun:
    """Read everything the run needs up front, so a mistake fails before any server starts."""
    targets = option_targets(vars(args))
    manifest: Manifest | None = None
    mar: MarInfo | None = None
    if args.mar:
        mar = read_mar(args.mar)
        if args.model and args.model != [mar.model]:
            raise ValueError(f"{args.mar} serves {mar.model!r}, not {args.model}: drop --model")
        names, current = [mar.model], {mar.model: mar.settings}
    else:
        manifest = load_manifest(build_dir=args.build_dir)
        names = args.model or list(manifest.models)
        for name in names:
            manifest.model(name)
        properties = read_properties(args.properties)
        entries = model_settings(properties)
        current = {
            name: BatchSettings.configured(
                properties, name, entries.get(name, {}), manifest.model(name).kind.all_worker_keys
            )
            for name in names
        }
    requests = parse_requests_specs(args.requests, names[0] if len(names) == 1 else None, names)
    slas = slas_for(names, args.profile, args.sla_file or DEFAULT_SLA_FILE, targets)
    workloads = {
        name: traffic_for(name, requests=requests.get(name), answer_schema=args.answer_schema)
        for name in names
    }
    return TuningRun(names, slas, workloads, current, manifest, mar)


def point_runner(
    run: TuningRun, name: str, args: argparse.Namespace, load: LoadSpec, work_root: Path
) -> tuple[PointRunner, str]:
    """How this model's points are served, and what that serves (for the log)."""
    common = (args.properties, run.workloads[name], load, work_root, args.out / "logs")
    if run.mar is not None:
        runner: PointRunner = MarPointRunner(run.mar, *common)
        runner.packaged_decode_threads = run.mar.decode_threads
        return runner, f"{run.mar.path.name} as packaged"
    assert run.manifest is not None
    spec = run.manifest.model(name)
    variant = args.variant or default_variant(spec.artifact_dir)
    if args.variant:
        spec = variant_spec(spec, work_root, args.variant)
    runner = ManifestPointRunner(spec, run.manifest, *common)
    pool = next((key for key in spec.kind.all_worker_keys if key.name == DECODE_THREADS), None)
    if pool is not None:
        runner.packaged_decode_threads = run.current[name].worker_key(DECODE_THREADS, pool.default)
    return runner, variant.label


def decode_pools(args: argparse.Namespace, packaged: int | str | None) -> list[int | str]:
    """The decode pools to try: the user's, else auto, 1 and every core for a model with a pool."""
    if args.decode_threads:
        return args.decode_threads
    if packaged is None or args.quick:
        return []
    return [AUTO, *sorted({1, os.cpu_count() or 1})]


def write_winning_archive(mar: MarInfo, report: ModelReport, out: Path) -> None:
    """The winner packaged into the archive: TorchServe lets its model-config.yaml win over models=."""
    if report.selection.winner is None:
        return
    path = repackage(mar, out / mar.path.name, recommended_settings(report))
    print(f"[tune] the winner's archive (its model-config.yaml carries the settings): {display_path(path)}")


def apply_live(reports: list[ModelReport], run_dir: Path, properties: Path) -> int:
    """Serve each winner on the running server (``tsbatch apply``); 1 when one could not be applied."""
    server = TorchServe.from_run_dir(run_dir)
    for report in reports:
        point = report.selection.winner
        if point is None:
            continue
        try:
            apply_settings(server, report.model, point.settings, update_properties=properties)
        except (ApplyError, ValueError) as exc:
            print(f"[tune] FAILED to apply {report.model} live: {exc}", file=sys.stderr)
            return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    base_space, base_load = (QUICK_SPACE, QUICK_LOAD) if args.quick else (FULL_SPACE, FULL_LOAD)
    load = LoadSpec(
        concurrency=args.concurrency or base_load.concurrency,
        rate_rps=args.rate,
        warmup_s=args.warmup_s if args.warmup_s is not None else base_load.warmup_s,
        measure_s=args.measure_s if args.measure_s is not None else base_load.measure_s,
    )
    if not args.properties.is_file():  # every point's server starts from it
        print(
            f"[tune] FAILED: no config.properties at {args.properties}: run from the repository "
            "(or a folder that has one), or name one with --properties FILE",
            file=sys.stderr,
        )
        return 1
    if args.apply_live is not None and args.mar:
        print("[tune] FAILED: --apply-live packages manifest models; serve a --mar winner from its archive",
              file=sys.stderr)  # fmt: skip
        return 1
    try:
        run = tuning_run(args)
    except (ValueError, OSError) as exc:
        print(f"[tune] FAILED: {exc}", file=sys.stderr)
        return 1
    if run.manifest is not None:
        exported = artifacts.HANDLER_CONFIG_FILE  # every export writes it, TorchScript or not
        unbuilt = [n for n in run.names if not (run.manifest.model(n).artifact_dir / exported).exists()]
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
        for name in run.names:
            sla = run.slas[name]
            runner, serving = point_runner(run, name, args, load, work_root)
            foreign_or_quick = args.quick or run.mar is not None  # no torchThreads entry to size by
            workers = args.workers or (
                base_space.workers if foreign_or_quick else default_workers(args.properties, name)
            )
            space = SearchSpace(
                batch_sizes=args.batch_sizes or base_space.batch_sizes,
                delays_ms=args.delays or base_space.delays_ms,
                workers=workers,
                min_gain=args.min_gain if args.min_gain is not None else base_space.min_gain,
                decode_threads=decode_pools(args, runner.packaged_decode_threads),
                cores=os.cpu_count() or 1,
            )
            print(
                f"[tune] {name}: batch sizes {space.batch_sizes} x delays {space.delays_ms} ms x workers {space.workers}"
                + (f", then decodeThreads {pools_text(space.decode_threads)}" if space.decode_threads else "")
                + f", {load.describe()}, SLA {sla.profile} p99 <= {sla.p99_ms:g} ms, serving {serving}, "
                f"sending {run.workloads[name].source}"
            )
            try:
                outcome = search(name, sla, space, load, runner)
            except EveryPointFails as hopeless:
                print(f"[tune] FAILED: every point would fail the same way:\n{hopeless}", file=sys.stderr)
                return 1
            finally:
                runner.close()  # no server outlives its model's search
            report = report_model(name, outcome.points, sla, args.out, outcome.pruned, run.current[name])
            reports.append(report)
        meta = {
            "load": load.describe(),
            "warmup_s": load.warmup_s,
            "measure_s": load.measure_s,
            "profile": reports[0].sla.profile if reports else "?",
            "sla_file": display_path(args.sla_file or DEFAULT_SLA_FILE),
            "cpus": os.cpu_count(),
            "seconds": time.perf_counter() - started,
        }
        entry_source = args.properties
        if run.mar is not None:  # the entry names the archive's model alone
            entry_source = work_root / "entry.properties"
            entry_source.write_text(models_entry_base(run.mar))
            for report in reports:
                write_winning_archive(run.mar, report, args.out)
        code = finish(reports, args.out, meta, entry_source, args.apply)
        if args.apply_live is not None:
            code = apply_live(reports, args.apply_live, args.apply or args.properties) or code
    finally:
        shutil.rmtree(work_root, ignore_errors=True)
    print(f"[tune] done in {meta['seconds']:.0f} s")
    return code
