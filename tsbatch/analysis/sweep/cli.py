"""In-process batch-size sweep of the exported TorchScript models (``make sweep``).

For each model, input scenario and precision it times batches of 1, 2, 4, ... up to a
limit after warm-up, and records latency per batch (mean, p50, p95), throughput in
samples/s, peak memory (CUDA max allocated on a GPU, process RSS on the CPU) and how far
each sample's output drifts from running it alone at batch size 1 (max |diff|, cosine
similarity, top-1 agreement). An out-of-memory error ends that curve and is reported.

Inputs are the real ones: ResNet images go through the handler's own preprocessing at the
archive's input size; the intent model sees our utterances (padded to the longest of each
batch, as the handler pads) and a fixed long length. fp32 always runs; fp16 and bf16
autocast run on a GPU (bf16 on the CPU with ``--cpu-bf16``).

Writes ``sweep.csv``, one ``<model>_<precision>.png`` per model and precision, and
``summary.md`` naming the knee (smallest batch reaching 90% of peak throughput) and the
largest batch whose p95 stays within the latency budget.

    tsbatch sweep                                           # every built model, CPU here
    tsbatch sweep --model resnet18 --max-batch 8 --iters 5
    tsbatch sweep --model resnet18-imagenet --device cuda  # see scripts/gpu_check.sh
"""

from __future__ import annotations

import argparse
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

from batchkit.candidates import PRECISIONS
from tsbatch.analysis.options import int_list
from tsbatch.analysis.selection import power_of_two_batch_sizes
from tsbatch.analysis.sweep.measure import Budget
from tsbatch.analysis.sweep.report import default_budget, write_reports
from tsbatch.analysis.sweep.run import run_sweep
from tsbatch.analysis.sweep.swept import SweptModel, resolve_swept_models, stand_in_specs
from tsbatch.analysis.tune.mar import read_mar
from tsbatch.archive.manifest import load_manifest
from tsbatch.paths import DEFAULT_PROPERTIES, REPORTS_DIR

DEFAULT_OUT = REPORTS_DIR / "sweep"


def default_swept_models() -> list[str]:
    manifest = load_manifest()
    return list(manifest.models)


def default_threads(name: str) -> int:
    """The worker's torchThreads from config.properties, so in-process numbers compare with served ones."""
    from tsbatch.config.properties import configured_settings, model_settings, read_properties

    properties = read_properties(DEFAULT_PROPERTIES)
    if name not in model_settings(properties):
        return 1  # a stand-in (no archive): one thread, as a worker's default here
    return configured_settings(properties, name).torch_threads or 1


def in_process_swept_model(mar: Path) -> str:
    """The manifest model an archive holds; a ValueError for one the sweep cannot run in process."""
    info = read_mar(mar)
    if not info.toolkit_built or info.model not in load_manifest().models:
        raise ValueError(
            f"{mar} ({info.model}) was not built by this toolkit: the sweep runs a model in process, "
            f"which only the toolkit's own exports allow. Measure it served instead: "
            f"tsbatch tune --mar {mar} --requests PATH"
        )
    return info.model


def stand_in_names() -> str:
    """The stand-ins of this checkout's manifest; outside a checkout, how they are named."""
    try:
        return " / ".join(stand_in_specs(load_manifest()))
    except (OSError, ValueError):
        return "<model>-<kind's stand-in>, from the models.yaml of a checkout"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Time the exported models in process at batch sizes 1, 2, 4, ... and write the "
        "curves, plots and a summary naming the knee and the largest batch within the latency budget."
    )
    parser.add_argument(
        "--model",
        "--target",  # its first name, kept so older commands still run
        dest="models",
        action="append",
        help="manifest model (default: all of them), or its random-weight stand-in, timing only: "
        + stand_in_names(),
    )
    parser.add_argument(
        "--max-batch", type=int, default=64, help="largest batch size (powers of two up to it)"
    )
    parser.add_argument(
        "--batch-sizes", type=int_list, help="explicit list, e.g. 1,3,8 (overrides --max-batch)"
    )
    parser.add_argument("--iters", type=int, default=20, help="timed runs per point")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up runs per point")
    parser.add_argument("--max-seconds", type=float, default=5.0, help="cut a point's timed runs after this")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    parser.add_argument("--cpu-bf16", action="store_true", help="also run bf16 autocast on the CPU")
    parser.add_argument(
        "--threads", type=int, help="torch CPU threads (default: torchThreads in config.properties)"
    )
    parser.add_argument(
        "--latency-budget-ms", type=float, help="p95 batch latency budget (default: SLA p99 / 2)"
    )
    parser.add_argument(
        "--profile", help="SLA profile for the default budget (default: gpu on a GPU, else cpu)"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--skip-missing", action="store_true", help="report unbuilt models instead of failing"
    )
    parser.add_argument("--build-dir", type=Path, help="where the exported models are (default: build/)")
    parser.add_argument("--mar", type=Path, help="sweep the model of this archive (the toolkit's own only)")
    args = parser.parse_args(argv)
    if args.mar is not None:
        try:
            args.models = [*(args.models or []), in_process_swept_model(args.mar)]
        except ValueError as exc:
            print(f"[sweep] {exc}", file=sys.stderr)
            return 2

    device = torch.device(
        ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    )
    if device.type == "cuda" and not torch.cuda.is_available():
        print("[sweep] FAILED: --device cuda but torch sees no GPU", file=sys.stderr)
        return 1
    names = args.models or default_swept_models()
    threads = args.threads or max(default_threads(name) for name in names)
    torch.set_num_threads(threads)
    profile = args.profile or (None if device.type == "cpu" else "gpu")
    sizes = args.batch_sizes or power_of_two_batch_sizes(args.max_batch)
    budget = Budget(
        iters=args.iters, warmup=args.warmup, min_iters=min(3, args.iters), max_seconds=args.max_seconds
    )

    swept_models: list[SweptModel] = []
    missing: list[str] = []
    work_dir = Path(tempfile.mkdtemp(prefix="sweep-"))  # the base intent model's tokenizer, if needed
    for name in names:
        try:
            swept_models.extend(resolve_swept_models(name, work_dir, args.build_dir, device.type))
        except (OSError, ImportError, RuntimeError, ValueError) as exc:
            if not args.skip_missing:
                print(f"[sweep] FAILED: {exc}", file=sys.stderr)
                return 1
            missing.append(f"{name} not swept: {type(exc).__name__}: {exc}")
            print(f"[sweep] {missing[-1]}")
    if not swept_models:
        print("[sweep] FAILED: nothing to sweep", file=sys.stderr)
        return 1

    started = time.perf_counter()
    try:
        result = run_sweep(swept_models, sizes, device, args.precisions.split(","), budget, args.cpu_bf16)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    result.notes.extend(missing)
    if device.type == "cuda":
        result.notes.append(
            f"fp32 convolutions may use TF32 (torch.backends.cudnn.allow_tf32={torch.backends.cudnn.allow_tf32}, "
            f"matmul allow_tf32={torch.backends.cuda.matmul.allow_tf32})"
        )
    meta = {
        "device": torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"CPU ({platform.processor() or platform.machine()})",
        "device_type": device.type,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "iters": budget.iters,
        "warmup": budget.warmup,
        "max_seconds": budget.max_seconds,
        "batch_sizes": list(sizes),
        "seconds": round(time.perf_counter() - started, 1),
    }
    budgets = {t.name: args.latency_budget_ms or default_budget(t.sla_model, profile) for t in swept_models}
    paths = write_reports(result, swept_models, args.out, meta, budgets)
    print((args.out / "summary.md").read_text())
    print(
        f"[sweep] {len(result.rows)} points in {meta['seconds']} s; wrote {', '.join(str(p) for p in paths.values())}"
    )
    if any(row.status == "error" for row in result.rows):
        print(
            "[sweep] some points failed with errors other than out-of-memory (see the CSV note column)",
            file=sys.stderr,
        )
        return 1
    return 0
