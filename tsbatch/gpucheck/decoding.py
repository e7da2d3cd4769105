"""The decode half of ``scripts/gpu_check.sh``: JPEGs decoded on the device (the tensor
path of ``image_serving.decode``: one batched ``decode_jpeg`` call, resampled there) against
the CPU decode pool, in-process and served at 224x224, as rows of the summary table; and
real photos at camera sizes (1920x1080, 12 MP, 48 MP; ``--photos-only``, which needs no
build and runs in the script's first minutes) decoded in process both ways.

The served model is the built image classifier's TorchScript (``--model``, default: the
first image model of models.yaml) fed 224x224 crops (resize 256,
ImageNet mean/std, fp32): its weights do not matter, the decode path under it does. With
``--device cpu`` the same rows run on the CPU (the suite's smoke test).

    python -m tsbatch.gpucheck.decoding --device cuda --threads 4 --out reports/gpu-check
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from batchkit.config import from_mapping
from image_serving.config import ImageModelConfig
from image_serving.decode import DecodePool, ImageDecoder
from image_serving.images import model_batch
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import Manifest, ManifestError, load_manifest
from tsbatch.archive.package import private_store
from tsbatch.bench.decoding import decode_rate
from tsbatch.bench.model_option import add_model_option, chosen_model
from tsbatch.client.load import LoadDriver, LoadSpec
from tsbatch.gpucheck.serving import PHOTO_RESULTS_FILE
from tsbatch.kinds.image.examples import PHOTO_SIZES, encoded_pictures, photo_jpegs, request_pictures
from tsbatch.paths import REPO_ROOT
from tsbatch.server.process import TorchServe, start_instance

RESULTS_FILE = "decoding.json"
# The production shape: what a GPU worker decodes for.
IMAGENET = {
    "resize_size": 256,
    "crop_size": 224,
    "mean": [0.485, 0.456, 0.406],
    "std": [0.229, 0.224, 0.225],
}
# Served as plain fp32 TorchScript: the build's records and packages were made at its own shape.
PLAIN = {
    "precision": "fp32",
    "runtime": "torchscript",
    "check_outputs": {},
    "compiled_models": [],
    "compiled_max_batch_size": 0,
}


def imagenet_build(source: Path, work: Path) -> Path:
    """A build directory whose model (``source``'s) takes 224x224 crops, from its TorchScript."""
    build = work / "build"
    model_dir = build / source.name
    model_dir.mkdir(parents=True, exist_ok=True)
    for name in (artifacts.MODEL_FILE, artifacts.LABELS_FILE):
        shutil.copy2(source / name, model_dir / name)
    handler = {**artifacts.read_json(source / artifacts.HANDLER_CONFIG_FILE), **IMAGENET, **PLAIN}
    artifacts.write_json(model_dir / artifacts.HANDLER_CONFIG_FILE, handler)
    return build


def row(model: str, step: str, what: str, ok: bool, detail: str) -> dict[str, Any]:
    return {"step": step, "model": model, "served": what, "ok": ok, "detail": detail, "rss_mb": []}


def decode_rows(config: ImageModelConfig, device: str, threads: int, seconds: float) -> list[dict[str, Any]]:
    """Images per second decoded in-process: the tensor path on the device, the PIL pool on the CPU."""
    payloads = request_pictures(64, "imagenet")
    batch = 32
    pool = decode_rate(config, payloads, "pil", threads, batch, seconds)
    on_device = decode_rate(config, payloads, "tensor", 1, batch, seconds, torch.device(device))
    decoder = ImageDecoder(config, torch.device(device), "tensor", DecodePool(1))
    # A device crop beside a PIL crop: the tensor path hands a PNG to PIL.
    mixed = decoder.decode_batch([payloads[0], *encoded_pictures("photo", [(320, 240)], "PNG")])
    decoded = [item for item in mixed if isinstance(item, torch.Tensor)]
    shape = tuple(model_batch(decoded, config.mean, config.std, torch.device(device)).shape)
    model = config.model_name
    return [
        row(
            model,
            "decode",
            f"mixed JPEG+PNG batch on {device}",
            shape == (2, 3, 224, 224),
            f"model batch {shape}",
        ),
        row(
            model,
            "decode",
            f"pil x{threads} on the CPU",
            pool > 0,
            f"{pool:.0f} img/s at 224x224 (batches of {batch})",
        ),
        row(
            model,
            "decode",
            f"tensor on {device}",
            on_device > 0,
            f"{on_device:.0f} img/s at 224x224, {on_device / pool:.2f}x the CPU pool",
        ),
    ]


def photo_config() -> ImageModelConfig:
    """The ImageNet shape's decoding settings, with no model: what photo rows decode for."""
    files = {"model_name": "photos", "model_file": "-", "labels_file": "-", "weights": "none"}
    return from_mapping(ImageModelConfig, {**files, **IMAGENET})


def photo_rows(
    config: ImageModelConfig, device: str, threads: int, seconds: float, sizes: list[str], count: int = 4
) -> list[dict[str, Any]]:
    """Real photos per size decoded in process: the tensor path on the device (one batched
    call, full size, resampled there) against the CPU pool; the pixel limit is lifted to the
    photo so the row measures decoding, whatever the served limit."""
    rows = []
    for size in sizes:
        width, height = PHOTO_SIZES[size]
        photos = photo_jpegs(width, height, count)
        sized = replace(config, max_image_pixels=max(config.max_image_pixels, width * height))
        pool = decode_rate(sized, photos, "pil", threads, count, seconds)
        on_device = decode_rate(sized, photos, "tensor", 1, count, seconds, torch.device(device))
        megabytes = sum(map(len, photos)) / len(photos) / 1e6
        detail = (
            f"{on_device:.1f} img/s on {device} vs {pool:.1f} img/s pil x{threads} on the CPU "
            f"({on_device / pool:.2f}x; {megabytes:.1f} MB JPEGs, batches of {count})"
        )
        rows.append(row(config.model_name, "decode photo", size, pool > 0 and on_device > 0, detail))
    return rows


def served_rows(model: str, build: Path, threads: int, seconds: float, out: Path) -> list[dict[str, Any]]:
    """req/s at 224x224 served with the CPU pool and with the tensor path (one worker each):
    both servers start at once (a start is seconds of a lent GPU's minutes), then each is
    measured alone while the other idles."""
    repo = load_manifest()
    spec = replace(repo.model(model), build_dir=build)
    manifest = Manifest(models={model: spec}, build_dir=build, model_store=repo.model_store)
    decoders = (("pil", threads), ("tensor", 1))

    def serve(path: str, pool: int) -> TorchServe:
        changes = {model: {"decodePath": path, "decodeThreads": pool, "minWorkers": 1, "maxWorkers": 1}}
        properties, store = private_store(out / f"decode-{path}", [model], changes, manifest=manifest)
        return start_instance(out / f"decode-{path}" / "run", store, [model], source=properties, timeout=300)

    with ThreadPoolExecutor(len(decoders)) as starting:
        starts = [starting.submit(serve, path, pool) for path, pool in decoders]
    servers = [start.result() for start in starts if start.exception() is None]
    rows = []
    try:
        for start in starts:
            if (error := start.exception()) is not None:
                raise error
        for (path, pool), server in zip(decoders, servers, strict=True):
            driver = LoadDriver(
                f"{server.url('inference')}/predictions/{model}",
                request_pictures(64, "imagenet"),
                headers=server.client.headers(),
            )
            figures = driver.run(LoadSpec(concurrency=16, warmup_s=2.0, measure_s=seconds)).figures()
            rps = figures.throughput_rps or 0.0
            p50 = f"{figures.p50_ms:.0f}" if figures.p50_ms is not None else "n/a"
            detail = (
                f"{rps:.1f} req/s at 224x224, p50 {p50} ms, {figures.failures} errors of {figures.requests}"
            )
            rows.append(
                row(model, "serve decode", f"{path} x{pool}", rps > 0 and not figures.failures, detail)
            )
    finally:
        with ThreadPoolExecutor(max(len(servers), 1)) as stopping:
            list(stopping.map(TorchServe.stop, servers))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Decode JPEGs on the device against the CPU decode pool: images/s in process, "
        "and requests/s served at 224x224 with each (a step of scripts/gpu_check.sh)."
    )
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument(
        "--threads", type=int, default=min(4, os.cpu_count() or 1), help="the CPU pool's size"
    )
    parser.add_argument(
        "--seconds", type=float, default=15.0, help="measured seconds per served run (in process: at most 3)"
    )
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "reports" / "gpu-check")
    parser.add_argument(
        "--photo-sizes",
        default="1920x1080,4032x3024,8000x6000",
        help=f"real photos decoded per size, comma-separated, of {', '.join(PHOTO_SIZES)} ('' for none)",
    )
    parser.add_argument(
        "--photos-only",
        action="store_true",
        help="only the photo sizes (no build needed): the script's first step",
    )
    add_model_option(parser, "image")
    args = parser.parse_args(argv)
    sizes = [size for size in args.photo_sizes.split(",") if size]
    unknown = [size for size in sizes if size not in PHOTO_SIZES]
    if unknown:
        parser.error(f"unknown photo sizes {unknown}; choose from {', '.join(PHOTO_SIZES)}")
    if args.photos_only:
        return photos_main(args, sizes)
    manifest = load_manifest()
    try:
        model = chosen_model(args.model, "image", manifest)
    except ManifestError as exc:
        parser.error(str(exc))
    args.out.mkdir(parents=True, exist_ok=True)
    build = imagenet_build(manifest.model(model).artifact_dir, args.out / "decode-build")
    config = from_mapping(
        ImageModelConfig, artifacts.read_json(build / model / artifacts.HANDLER_CONFIG_FILE)
    )
    torch.set_num_threads(1)  # as a worker at torchThreads=1 decodes
    rows: list[dict[str, Any]] = []
    try:
        rows += decode_rows(config, args.device, args.threads, min(args.seconds, 3.0))
        rows += served_rows(model, build, args.threads, args.seconds, args.out)
    except Exception as exc:  # the summary table says what failed; the other steps still count
        rows.append(row(model, "decode", "", False, f"{type(exc).__name__}: {str(exc)[:300]}"))
    (args.out / RESULTS_FILE).write_text(json.dumps(rows, indent=2))
    for line in rows:
        print(f"[gpu-check] {line['step']} {line['served']}: {line['detail']}")
    return 0 if all(line["ok"] for line in rows) else 1


def photos_main(args: argparse.Namespace, sizes: list[str]) -> int:
    """The photo rows alone, into their own results file (the summary reads it)."""
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    try:
        rows = photo_rows(photo_config(), args.device, args.threads, min(args.seconds, 3.0), sizes)
    except Exception as exc:  # the summary table says what failed
        rows = [row("photos", "decode photo", "", False, f"{type(exc).__name__}: {str(exc)[:300]}")]
    (args.out / PHOTO_RESULTS_FILE).write_text(json.dumps(rows, indent=2))
    for line in rows:
        print(f"[gpu-check] {line['step']} {line['served']}: {line['detail']}")
    return 0 if all(line["ok"] for line in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
