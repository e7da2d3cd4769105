"""SLA-driven batch tuner through a real TorchServe (``make tune``).

For each model it searches batchSize x maxBatchDelay x worker count. Every setting tried
gets its own archive (TorchServe lets the archive's model-config.yaml win over
config.properties, so the setting must be packaged in) in a temporary model store, and
its own private TorchServe on free loopback ports, token auth on. The load client then
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
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from batchkit.candidates import ServingCandidate
from tsbatch.analysis.options import int_list
from tsbatch.analysis.tune.point import PointRunner, payloads_for
from tsbatch.analysis.tune.report import finish, report_model
from tsbatch.analysis.tune.search import FULL_LOAD, FULL_SPACE, QUICK_LOAD, QUICK_SPACE, SearchSpace, search
from tsbatch.archive.manifest import load_manifest
from tsbatch.archive.variants import default_variant, variant_spec
from tsbatch.client.load import LoadSpec
from tsbatch.config.properties import archive_entry, model_settings, read_properties
from tsbatch.paths import DEFAULT_PROPERTIES, DEFAULT_SLA_FILE, REPO_ROOT, REPORTS_DIR
from tsbatch.sla.profiles import load_sla

DEFAULT_OUT = REPORTS_DIR / "tune"


def display_path(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def default_workers(properties: Path, model: str) -> list[int]:
    """1 up to the worker count that fills the CPUs at the configured torchThreads (max 4)."""
    threads = archive_entry(read_properties(properties), model)["torchThreads"]
    most = max(1, min(4, (os.cpu_count() or 1) // max(1, threads)))
    return sorted({1, most})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", action="append", help="model to tune (default: every manifest model)")
    parser.add_argument(
        "--quick", action="store_true", help="3 short points, 1 worker: a smoke run for tests"
    )
    parser.add_argument("--profile", help="SLA profile (default: $SLA_PROFILE, then the file's default)")
    parser.add_argument("--sla-file", type=Path, help="SLA file (default: loadtest/sla.yaml)")
    parser.add_argument("--batch-sizes", type=int_list)
    parser.add_argument("--delays", type=int_list, help="maxBatchDelay values in ms")
    parser.add_argument("--workers", type=int_list)
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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    base_space, base_load = (QUICK_SPACE, QUICK_LOAD) if args.quick else (FULL_SPACE, FULL_LOAD)
    load = LoadSpec(
        concurrency=args.concurrency or base_load.concurrency,
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
            variant = args.variant or default_variant(spec.artifact_dir)
            if args.variant:
                spec = variant_spec(spec, work_root, args.variant)
            space = SearchSpace(
                batch_sizes=args.batch_sizes or base_space.batch_sizes,
                delays_ms=args.delays or base_space.delays_ms,
                workers=args.workers
                or (base_space.workers if args.quick else default_workers(args.properties, name)),
                min_gain=args.min_gain if args.min_gain is not None else base_space.min_gain,
            )
            print(
                f"[tune] {name}: batch sizes {space.batch_sizes} x delays {space.delays_ms} ms x workers {space.workers}, "
                f"{load.describe()}, SLA {sla.profile} p99 <= {sla.p99_ms:g} ms, serving {variant.label}"
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
