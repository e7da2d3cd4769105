"""Benchmark: the ResNet served by TorchServe under concurrent clients vs the same
TorchScript model run in-process at the same batch size and thread count.

The served figure includes everything a client pays for (HTTP, the frontend's batching
queue, image decoding and preprocessing, the worker round trip); the in-process figure
is the model alone. Their ratio is the serving overhead. Two shapes are measured:

* ``archive``: the model that ``make archive`` built (here: digits, 32x32 input);
* ``imagenet``: the production shape (resnet18, 224x224 after resize 256 / crop 224,
  1000 classes) with random weights, for timing only.

    python -m scripts.bench_resnet --shape both --clients 16 --duration 20
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path

import torch
import torchvision

from batchkit.config import ImageModelConfig
from batchkit.runtime import load_torchscript
from tsbatch.build import artifacts
from tsbatch.build.manifest import Manifest, ModelSpec, load_manifest
from tsbatch.build.package import private_store
from tsbatch.client.load import LoadDriver, LoadSpec
from tsbatch.client.process import start_instance
from tsbatch.config.properties import model_settings, read_properties
from tsbatch.paths import DEFAULT_PROPERTIES
from tsbatch.workloads.images import encoded_pictures

MODEL = "resnet18"


def payload_images(count: int, shape: str, seed: int = 0) -> list[bytes]:
    """Varied pictures: small digit-like PNGs for the digits model, photo-sized JPEGs for ImageNet."""
    rng = random.Random(seed)
    if shape == "imagenet":
        sizes = [(rng.randint(256, 639), rng.randint(256, 479)) for _ in range(count)]
        return encoded_pictures("photo", sizes, "JPEG", seed)
    sides = [rng.randint(28, 95) for _ in range(count)]
    return encoded_pictures("digit", [(side, side) for side in sides], "PNG", seed)


def imagenet_spec(spec: ModelSpec, work: Path) -> ModelSpec:
    """Export an ImageNet-shaped resnet18 with random weights (timing only) into ``work``."""
    from tsbatch.build.resnet.export import export

    weights = work / "random-init-benchmark-only.pth"
    torch.manual_seed(0)
    torch.save(torchvision.models.resnet18().state_dict(), weights)
    bench_spec = replace(spec, build_dir=work / "build")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export(bench_spec, weights, None)
    return bench_spec


def in_process_throughput(
    spec: ModelSpec, batch_size: int, threads: int, duration_s: float, optimize: bool
) -> float:
    """Images per second of the TorchScript model alone, batch after batch, loaded as a
    worker loads it (``optimize``: frozen and optimized for inference) or as exported."""
    config = artifacts.read_json(spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE)
    torch.set_num_threads(threads)
    model = load_torchscript(spec.artifact_dir / artifacts.MODEL_FILE, torch.device("cpu"), optimize=optimize)
    batch = torch.randn(batch_size, 3, config["crop_size"], config["crop_size"])
    with torch.inference_mode():
        for _ in range(3):
            model(batch)
        count, started = 0, time.perf_counter()
        while time.perf_counter() - started < duration_s:
            model(batch)
            count += batch_size
    return count / (time.perf_counter() - started)


def bench(
    spec: ModelSpec, shape: str, settings: dict[str, int], args: argparse.Namespace, work: Path
) -> dict:
    manifest = load_manifest()
    private = Manifest(models={MODEL: spec}, build_dir=spec.build_dir, model_store=manifest.model_store)
    properties, store = private_store(work / f"store-{shape}", [MODEL], {MODEL: settings}, manifest=private)
    server = start_instance(work / f"run-{shape}", store, [MODEL], source=properties)
    try:
        driver = LoadDriver(
            f"{server.url('inference')}/predictions/{MODEL}",
            payload_images(64, shape),
            headers=server.headers(),
        )
        load = LoadSpec(concurrency=args.clients, warmup_s=args.warmup, measure_s=args.duration)
        served = driver.run(load).figures()
    finally:
        server.stop()
    threads = settings["maxWorkers"] * settings["torchThreads"]
    optimize = bool(
        artifacts.read_json(spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE).get(
            "optimize", ImageModelConfig.optimize
        )
    )
    seconds = min(args.duration, 10)
    in_process = in_process_throughput(spec, settings["batchSize"], threads, seconds, optimize)
    plain = (
        in_process_throughput(spec, settings["batchSize"], threads, seconds, False)
        if optimize
        else in_process
    )
    served_rps = served.throughput_rps or 0.0
    return {
        "shape": shape,
        "served_rps": served_rps,
        "p50_ms": served.p50_ms if served.p50_ms is not None else float("nan"),
        "p99_ms": served.p99_ms if served.p99_ms is not None else float("nan"),
        "errors": served.failures,
        "completed": served.requests,
        "in_process_ips": in_process,
        "plain_ips": plain,
        "ratio": served_rps / in_process if in_process else float("nan"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shape", choices=["archive", "imagenet", "both"], default="both")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration", type=float, default=20.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--delay", type=int, help="maxBatchDelay in ms")
    parser.add_argument("--workers", type=int)
    parser.add_argument("--threads", type=int, help="torchThreads per worker")
    args = parser.parse_args(argv)

    configured = model_settings(read_properties(DEFAULT_PROPERTIES))[MODEL]
    settings = {
        key: int(configured[key])
        for key in ("batchSize", "maxBatchDelay", "minWorkers", "maxWorkers", "torchThreads")
    }
    for key, value in (
        ("batchSize", args.batch_size),
        ("maxBatchDelay", args.delay),
        ("torchThreads", args.threads),
    ):
        if value is not None:
            settings[key] = value
    if args.workers is not None:
        settings["minWorkers"] = settings["maxWorkers"] = args.workers

    spec = load_manifest().model(MODEL)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-resnet-") as tmp:
        work = Path(tmp)
        shapes = ["archive", "imagenet"] if args.shape == "both" else [args.shape]
        for shape in shapes:
            target = spec if shape == "archive" else imagenet_spec(spec, work)
            print(f"[bench] {shape}: serving with {settings} under {args.clients} clients ...", flush=True)
            rows.append(bench(target, shape, settings, args, work))

    print(
        f"\nResNet served vs in-process (batchSize={settings['batchSize']}, maxBatchDelay={settings['maxBatchDelay']} ms, "
        f"workers={settings['maxWorkers']}, torchThreads={settings['torchThreads']}, {args.clients} clients, "
        f"{args.duration:.0f}s measured)"
    )
    print(
        f"{'shape':<10}{'served req/s':>14}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}"
        f"{'in-process img/s':>18}{'ratio':>8}{'plain TorchScript img/s':>25}"
    )
    for row in rows:
        print(
            f"{row['shape']:<10}{row['served_rps']:>14.1f}{row['p50_ms']:>9.1f}{row['p99_ms']:>9.1f}"
            f"{row['errors']:>8d}{row['in_process_ips']:>18.1f}{row['ratio']:>8.2f}{row['plain_ips']:>25.1f}"
        )
    print(
        "in-process: the module as workers run it (frozen + optimize_for_inference unless the archive "
        "says optimize: false); plain: the exported TorchScript as saved."
    )
    return 1 if any(row["errors"] or not row["completed"] for row in rows) else 0
