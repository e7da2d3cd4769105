"""Benchmark: the ResNet served by TorchServe under concurrent clients vs the same
model run in-process at the same batch size and thread count, one row per runtime x
precision this machine can run (``tsbatch.archive.variants``), fp32 TorchScript first as
the baseline, and the default configuration's speedup over it.

The served figure includes everything a client pays for (HTTP, the frontend's batching
queue, image decoding and preprocessing, the worker round trip); the in-process figure
is decoding, preprocessing and the model in one loop. Their ratio is the serving
overhead. Two shapes are measured:

* ``archive``: the model that ``make archive`` built (here: digits, 32x32 input);
* ``imagenet``: the production shape (the model's architecture, 224x224 after resize 256 /
  crop 224, 1000 classes) with random weights, for timing only.

    tsbatch bench resnet --shape both --clients 16 --duration 20
    tsbatch bench resnet --mar my_model.mar --requests my_requests/   # any archive, served
"""

from __future__ import annotations

import argparse
import functools
import os
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path

import torch
import torchvision

from batchkit.candidates import BASELINE, ServingCandidate
from batchkit.config import from_mapping
from batchkit.loader import load_served_model
from image_serving.config import ImageModelConfig
from image_serving.images import check_images, decode_pixels, model_batch
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import Manifest, ManifestError, ModelSpec, load_manifest
from tsbatch.archive.package import private_store
from tsbatch.archive.variants import default_variant, machine_variants, variant_spec
from tsbatch.bench.decoding import SETTINGS as DECODE_SETTINGS
from tsbatch.bench.decoding import auto_threads, decode_rows, print_section
from tsbatch.bench.model_option import add_model_option, chosen_model
from tsbatch.bench.served_archive import add_archive_options, bench_archive
from tsbatch.client.load import LoadDriver, LoadSpec
from tsbatch.config.properties import configured_settings, read_properties
from tsbatch.kinds.image.examples import request_pictures
from tsbatch.kinds.image.kind import DECODE_KEYS
from tsbatch.kinds.image.schema import ImageModel
from tsbatch.paths import DEFAULT_PROPERTIES
from tsbatch.server.process import start_instance
from tsbatch.server.served import worker_rss_mb
from tsbatch.settings.batch import TUNED_KEYS, BatchSettings

# What the bench writes into its private config.properties (and prints).
SERVED_KEYS = (*TUNED_KEYS, "torchThreads", *(k.name for k in DECODE_KEYS))


def imagenet_spec(spec: ModelSpec, work: Path, compiled: bool = True) -> ModelSpec:
    """Export an ImageNet-shaped model of ``spec``'s architecture with random weights (timing
    only) into ``work``; without ``compiled``, TorchScript fp32 alone (seconds instead of
    minutes of compiling)."""
    from tsbatch.kinds.image.export import export

    weights = work / "random-init-benchmark-only.pth"
    torch.manual_seed(0)
    architecture = spec.entry_as(ImageModel).architecture
    torch.save(torchvision.models.get_model(architecture).state_dict(), weights)
    # Random weights answer noise: record the gates but keep every candidate, for timing.
    host: str | tuple[str, ...] = "host" if compiled else ()
    compile_section = {"targets": host, "torchscript_precisions": host, "enforce_gates": False}
    bench_spec = replace(spec.with_settings(compile=compile_section), build_dir=work / "build")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export(bench_spec, weights, None)
    return bench_spec


def in_process(
    spec: ModelSpec, variant: ServingCandidate, batch_size: int, threads: int, duration_s: float
) -> dict:
    """The worker's path without TorchServe: the variant loaded as a worker loads it, then
    batch after batch of real payloads decoded and preprocessed, then the model. Returns
    images per second with and without preprocessing, its share, and the cold load time."""
    values = artifacts.read_json(spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE)
    config = from_mapping(
        ImageModelConfig, {**values, "runtime": variant.runtime, "precision": variant.precision}
    )
    torch.set_num_threads(threads)
    check = (check_images(config.crop_size),)
    model = load_served_model(
        config, spec.artifact_dir, torch.device("cpu"), batch_size, check, optimize=config.optimize
    )
    payloads = request_pictures(64, "imagenet" if config.crop_size > 64 else "archive")

    decoding = ("resize_size", "crop_size", "max_image_pixels", "max_body_bytes")
    decode = functools.partial(decode_pixels, **{name: getattr(config, name) for name in decoding})
    cpu = torch.device("cpu")

    def decoded_batch(start: int) -> torch.Tensor:
        bodies = [payloads[(start + i) % len(payloads)] for i in range(batch_size)]
        return model_batch([decode(body) for body in bodies], config.mean, config.std, cpu)

    preprocess_s = model_s = 0.0
    count = 0
    with torch.inference_mode():
        for _ in range(3):
            model(decoded_batch(0))
        while preprocess_s + model_s < duration_s:
            started = time.perf_counter()
            batch = decoded_batch(count)
            decoded = time.perf_counter()
            model(batch)
            preprocess_s += decoded - started
            model_s += time.perf_counter() - decoded
            count += batch_size
    return {
        "in_process_ips": count / (preprocess_s + model_s),
        "model_ips": count / model_s,
        "preprocess_share": preprocess_s / (preprocess_s + model_s),
        "load_s": model.load_seconds,
    }


def serve(
    spec: ModelSpec,
    shape: str,
    variant: ServingCandidate,
    settings: BatchSettings,
    args: argparse.Namespace,
    work: Path,
) -> dict:
    """The variant served by TorchServe with ``settings`` under the clients: req/s, latency, RSS."""
    manifest = load_manifest()
    model = spec.name
    spec = variant_spec(spec, work / shape, variant)
    private = Manifest(models={model: spec}, build_dir=spec.build_dir, model_store=manifest.model_store)
    decode = "".join(f"-{k.name}-{v}" for k in DECODE_KEYS if (v := settings.worker_key(k.name)) is not None)
    name = f"{shape}-{variant.name}{decode}"
    changes = {model: settings.entry(SERVED_KEYS)}
    properties, store = private_store(work / f"store-{name}", [model], changes, manifest=private)
    server = start_instance(work / f"run-{name}", store, [model], source=properties)
    try:
        driver = LoadDriver(
            f"{server.url('inference')}/predictions/{model}",
            request_pictures(64, shape),
            headers=server.client.headers(),
        )
        load = LoadSpec(concurrency=args.clients, warmup_s=args.warmup, measure_s=args.duration)
        served = driver.run(load).figures()
        rss_mb = max(worker_rss_mb(server, model), default=float("nan"))  # after the load: what pods need
    finally:
        server.stop()
    return {
        "shape": shape,
        "variant": variant,
        "served_rps": served.throughput_rps or 0.0,
        "p50_ms": served.p50_ms if served.p50_ms is not None else float("nan"),
        "p99_ms": served.p99_ms if served.p99_ms is not None else float("nan"),
        "errors": served.failures,
        "completed": served.requests,
        "rss_mb": rss_mb,
    }


def bench(
    served: dict, spec: ModelSpec, settings: BatchSettings, args: argparse.Namespace, work: Path
) -> dict:
    """A served row with its variant's in-process figures beside it."""
    shape, variant = served["shape"], served["variant"]
    threads = (settings.max_workers or 1) * (settings.torch_threads or 1)
    local = in_process(
        variant_spec(spec, work / shape, variant),
        variant,
        settings.batch_size,
        threads,
        min(args.duration, 10),
    )
    served_rps = served["served_rps"]
    return {
        **served,
        **local,
        "ratio": served_rps / local["in_process_ips"] if local["in_process_ips"] else float("nan"),
    }


def decode_section(
    spec: ModelSpec,
    shape: str,
    default: ServingCandidate,
    settings: BatchSettings,
    args: argparse.Namespace,
    work: Path,
) -> dict:
    """The decode rows of one shape: in-process rates per path x pool size, and the
    default variant served with each."""
    values = artifacts.read_json(spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE)
    config = from_mapping(ImageModelConfig, values)
    payloads = request_pictures(64, shape)
    rows = decode_rows(config, payloads, settings.batch_size, min(args.duration, 3))
    served = []
    for path, threads in DECODE_SETTINGS:
        print(f"[bench] {shape} {default.label}: serving with decode {path} x{threads} ...")
        changed = settings.with_worker(decodePath=path, decodeThreads=threads)
        served.append((f"{path} x{threads}", serve(spec, shape, default, changed, args, work)))
    return {
        "shape": shape,
        "rows": rows,
        "served": served,
        "auto": auto_threads(config, payloads, settings.batch_size),
    }


def print_rows(rows: list[dict]) -> None:
    print(
        f"{'shape':<10}{'runtime precision':<19}{'served req/s':>13}{'p50 ms':>8}{'p99 ms':>8}{'errors':>7}"
        f"{'in-process img/s':>17}{'ratio':>7}{'model img/s':>12}{'preproc':>8}{'load s':>7}{'RSS MiB':>8}"
    )
    for row in rows:
        print(
            f"{row['shape']:<10}{row['variant'].label:<19}{row['served_rps']:>13.1f}{row['p50_ms']:>8.1f}"
            f"{row['p99_ms']:>8.1f}{row['errors']:>7d}{row['in_process_ips']:>17.1f}{row['ratio']:>7.2f}"
            f"{row['model_ips']:>12.1f}{row['preprocess_share']:>8.0%}{row['load_s']:>7.2f}{row['rss_mb']:>8.0f}"
        )


def speedup_line(served: dict[ServingCandidate, float], default: ServingCandidate) -> str:
    """The closing line: the default configuration's served throughput over the baseline's."""
    if default not in served or not served.get(BASELINE):
        return f"speedup vs fp32 TorchScript served: n/a ({default.label} was not measured here)"
    return f"speedup vs fp32 TorchScript served: {served[default] / served[BASELINE]:.2f}x ({default.label})"


def int8_line(served: dict[ServingCandidate, float]) -> str | None:
    """The int8 row's served throughput over fp32 TorchScript's and the best bf16 row's."""
    int8 = served.get(ServingCandidate("aoti", "cpu", "int8"))
    if not int8 or not served.get(BASELINE):
        return None
    bf16 = max((rps for variant, rps in served.items() if variant.precision == "bf16"), default=0.0)
    versus_bf16 = f", {int8 / bf16:.2f}x the best bf16 row" if bf16 else ""
    return f"int8 served: {int8 / served[BASELINE]:.2f}x fp32 TorchScript served{versus_bf16}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Serve the image classifier under concurrent clients and run it in process at the "
        "same batch size, one row per runtime and precision this machine can run, fp32 TorchScript first. "
        "With --mar, serve any archive with your requests instead."
    )
    parser.add_argument("--shape", choices=["archive", "imagenet", "both"], default="both")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration", type=float, default=20.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--delay", type=int, help="maxBatchDelay in ms")
    parser.add_argument("--workers", type=int)
    parser.add_argument("--threads", type=int, help="torchThreads per worker")
    add_model_option(parser, "image")
    add_archive_options(parser)
    args = parser.parse_args(argv)
    if args.mar is not None:  # any archive, served with the given requests
        return bench_archive(args)
    if args.requests:
        parser.error("--requests goes with --mar (this benchmark's own archive takes its images)")

    manifest = load_manifest()
    try:
        model = chosen_model(args.model, "image", manifest)
    except ManifestError as exc:
        parser.error(str(exc))
    configured = configured_settings(read_properties(DEFAULT_PROPERTIES), model, DECODE_KEYS)
    settings = configured.changed(args.batch_size, args.delay, args.workers)
    if args.threads is not None:
        settings = replace(settings, torch_threads=args.threads)

    spec = manifest.model(model)
    rows: list[dict] = []
    sections: list[dict] = []
    defaults: dict[str, ServingCandidate] = {}
    with tempfile.TemporaryDirectory(prefix="bench-resnet-") as tmp:
        work = Path(tmp)
        shapes = ["archive", "imagenet"] if args.shape == "both" else [args.shape]
        for shape in shapes:
            shape_spec = spec if shape == "archive" else imagenet_spec(spec, work)
            variants, skipped = machine_variants(shape_spec.artifact_dir, settings.batch_size)
            defaults[shape] = default_variant(shape_spec.artifact_dir, settings.batch_size)
            if defaults[shape] not in variants:  # an explicit setting's choice is measured too
                variants.append(defaults[shape])
            for reason in skipped:
                print(f"[bench] {shape}: skipping {reason}")
            for variant in variants:
                print(
                    f"[bench] {shape} {variant.label}: serving with {settings.entry(SERVED_KEYS)} under "
                    f"{args.clients} clients ..."
                )
                rows.append(
                    bench(
                        serve(shape_spec, shape, variant, settings, args, work),
                        shape_spec,
                        settings,
                        args,
                        work,
                    )
                )
            sections.append(decode_section(shape_spec, shape, defaults[shape], settings, args, work))

    print(
        f"\n{model} served vs in-process (batchSize={settings.batch_size}, maxBatchDelay={settings.max_batch_delay_ms} ms, "
        f"workers={settings.max_workers}, torchThreads={settings.torch_threads}, {args.clients} clients, "
        f"{args.duration:.0f}s measured)"
    )
    print_rows(rows)
    print(
        "in-process: decode + preprocess + the model as a worker loads it; model: the model alone; "
        "preproc: preprocessing's share of in-process time; load s: cold load of the model."
    )
    for shape, default in defaults.items():
        served = {row["variant"]: row["served_rps"] for row in rows if row["shape"] == shape}
        print(f"{shape}: {speedup_line(served, default)}")
        line = int8_line(served)
        if line:
            print(f"{shape}: {line}")
    print(
        f"\nDecoding (image_serving.decode) in-process per path x decode threads on this machine's "
        f"{os.cpu_count()} cores, then the default variant served with each:"
    )
    for section in sections:
        model_row = next(
            (
                row
                for row in rows
                if row["shape"] == section["shape"] and row["variant"] == defaults[section["shape"]]
            ),
            None,
        )
        print_section(section, model_row, settings.entry())
    decode_served = [row for section in sections for _, row in section["served"]]
    return 1 if any(row["errors"] or not row["completed"] for row in rows + decode_served) else 0
