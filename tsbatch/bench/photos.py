"""Benchmark: real photos at the sizes people send (``tsbatch bench photos``, ``make bench-photos``).

The ImageNet-shaped ResNet of ``tsbatch bench resnet --shape imagenet`` (224x224 crop, the
variant this machine serves, int8 where the build gates it) is served three ways in one
run, each loaded in turn with real photos of each size (``tsbatch.kinds.image.photos``):
our handler with reference decoding (``reducedDecode: off``), with reduced-size JPEG
decoding (``reducedDecode: on``), both at the decode layout the tuner picks for large photos
(every core decoding: ``decodeThreads`` = cores per worker), and TorchServe's stock
``image_classifier`` handler on the same TorchScript model as the baseline. Per row:
req/s, p50/p99, the server's cores used (CPU seconds of its processes over the run's wall
time), errors; per size the in-process decode time of one photo on one thread and the
decode-bound limit it sets (cores / decode time).

    tsbatch bench photos
    tsbatch bench photos --sizes 1920x1080,4032x3024 --duration 10
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml
from PIL import Image

from batchkit.config import ImageModelConfig, from_mapping
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import Manifest, ManifestError, load_manifest
from tsbatch.archive.package import MODEL_CONFIG_FILE, private_store
from tsbatch.archive.variants import default_variant, variant_spec
from tsbatch.bench.decoding import decode_rate
from tsbatch.bench.model_option import add_model_option, chosen_model
from tsbatch.bench.resnet import imagenet_spec
from tsbatch.client.load import LoadDriver, LoadSpec
from tsbatch.config.properties import model_settings, read_properties
from tsbatch.kinds.image.photos import PHOTO_SIZES, photo_jpegs
from tsbatch.paths import DEFAULT_PROPERTIES
from tsbatch.server.process import TorchServe, start_instance

REDUCED_KEY = "reducedDecode"  # the image worker's key for reduced-size JPEG decoding
MODES = ("off", "on")  # reference decoding, then reduced
STOCK = "stock"


@dataclass(frozen=True)
class Row:
    size: str
    server: str  # off, on or stock
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int
    requests: int
    cores: float


def group_cpu_seconds(pid: int, proc: Path = Path("/proc")) -> float:
    """CPU seconds (user + system) of every live process in ``pid``'s process group: the
    TorchServe frontend and its workers, started in one session by ``TorchServe.start``."""
    group, ticks, total = os.getpgid(pid), os.sysconf("SC_CLK_TCK"), 0.0
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        after = stat[stat.rindex(")") + 2 :].split()  # fields from the state on: pgrp is [2]
        if int(after[2]) == group:
            total += (int(after[11]) + int(after[12])) / ticks
    return total


def server_pid(server: TorchServe) -> int:
    return int((server.run_dir / "launcher.pid").read_text())


def measure(server: TorchServe, model: str, size: str, bodies: list[bytes], load: LoadSpec, name: str) -> Row:
    driver = LoadDriver(
        f"{server.url('inference')}/predictions/{model}", bodies, headers=server.client.headers("inference")
    )
    pid = server_pid(server)
    cpu, started = group_cpu_seconds(pid), time.perf_counter()
    figures = driver.run(load).figures()
    cores = (group_cpu_seconds(pid) - cpu) / (time.perf_counter() - started)
    nan = float("nan")
    return Row(
        size,
        name,
        figures.throughput_rps or 0.0,
        nan if figures.p50_ms is None else figures.p50_ms,
        nan if figures.p99_ms is None else figures.p99_ms,
        figures.failures,
        figures.requests,
        cores,
    )


def stock_store(artifact_dir: Path, model: str, settings: dict[str, Any], work: Path) -> Path:
    """A store whose ``<model>.mar`` is TorchServe's stock ``image_classifier`` on the fp32
    TorchScript model, with the same batch settings in its model-config.yaml."""
    store = work / "stock-store"
    store.mkdir(parents=True)
    config = work / MODEL_CONFIG_FILE
    keys = ("batchSize", "maxBatchDelay", "minWorkers", "maxWorkers", "responseTimeout")
    config.write_text(yaml.safe_dump({key: settings[key] for key in keys if key in settings}))
    command = [
        str(Path(sys.executable).parent / "torch-model-archiver"),
        "--model-name", model, "--version", "1.0",
        "--serialized-file", str(artifact_dir / artifacts.MODEL_FILE),
        "--handler", "image_classifier", "--config-file", str(config),
        "--export-path", str(store), "--force",
    ]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, env={**os.environ, "TMPDIR": str(work)})
    return store


def decode_ms(config: ImageModelConfig, bodies: list[bytes], reduced: str, seconds: float) -> float:
    """One photo's decode and crop in process, on one thread, in ms (``reduced``: the
    reducedDecode value). The pixel limit is lifted to the photo's size: the cost of decoding a
    48 MP photo in full is measured, though a server refuses it with 413 at the shipped limit."""
    with Image.open(io.BytesIO(bodies[0])) as image:
        pixels = image.width * image.height
    config = replace(config, reduced_decode=reduced, max_image_pixels=max(config.max_image_pixels, pixels))
    return 1000.0 / decode_rate(config, bodies, "pil", 1, 1, seconds)


def refused_by_design(row: Row, max_image_pixels: int) -> bool:
    """Reference decoding of a photo over the pixel limit: its 413s are the limit working."""
    width, height = PHOTO_SIZES[row.size]
    return row.server == "off" and width * height > max_image_pixels


def print_table(rows: list[Row], decode: dict[tuple[str, str], float], cores: int, layout: str) -> None:
    print(f"\nReal photos served ({layout}); stock = TorchServe's image_classifier, fp32 TorchScript")
    print(
        f"{'photo':<11}{'server':<8}{'req/s':>8}{'p50 ms':>8}{'p99 ms':>8}{'errors':>7}{'cores':>7}"
        f"{'decode ms':>10}{'limit req/s':>12}{'of limit':>9}{'vs stock':>9}"
    )
    for row in rows:
        stock = next((r.rps for r in rows if r.size == row.size and r.server == STOCK), 0.0)
        ms = decode.get((row.size, row.server))
        limit = cores * 1000 / ms if ms else None
        print(
            f"{row.size:<11}{row.server:<8}{row.rps:>8.1f}{row.p50_ms:>8.0f}{row.p99_ms:>8.0f}{row.errors:>7d}"
            f"{row.cores:>7.2f}{(f'{ms:.1f}' if ms else '-'):>10}{(f'{limit:.0f}' if limit else '-'):>12}"
            f"{(f'{row.rps / limit:.0%}' if limit else '-'):>9}"
            f"{(f'{row.rps / stock:.2f}x' if stock and row.server != STOCK else '-'):>9}"
        )
    print(
        f"decode ms: one photo decoded and cropped in process on one thread; limit: this machine's "
        f"decode-bound rate ({cores} cores / decode time); cores: the server's CPU seconds over wall time."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Serve the ImageNet-shaped image classifier with real photos per size: reference and "
        "reduced-size JPEG decoding, beside TorchServe's stock image_classifier handler in the same run."
    )
    parser.add_argument("--sizes", default=",".join(PHOTO_SIZES), help=f"of {', '.join(PHOTO_SIZES)}")
    parser.add_argument("--photos", type=int, default=8, help="different photos per size")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration", type=float, default=6.0, help="measured seconds per row")
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument(
        "--decode-threads", type=int, default=os.cpu_count() or 1, help="per worker (default: every core)"
    )
    parser.add_argument("--no-stock", action="store_true", help="leave out the stock handler's rows")
    parser.add_argument(
        "--torchscript", action="store_true", help="fp32 TorchScript only: seconds to export, not minutes"
    )
    add_model_option(parser, "image")
    args = parser.parse_args(argv)
    sizes = [size.strip() for size in args.sizes.split(",") if size.strip()]
    unknown = [size for size in sizes if size not in PHOTO_SIZES]
    if unknown:
        parser.error(f"unknown sizes {unknown}; choose from {', '.join(PHOTO_SIZES)}")
    manifest = load_manifest()
    try:
        model = chosen_model(args.model, "image", manifest)
    except ManifestError as exc:
        parser.error(str(exc))
    configured = model_settings(read_properties(DEFAULT_PROPERTIES))[model]
    keys = ("batchSize", "maxBatchDelay", "minWorkers", "maxWorkers", "responseTimeout", "torchThreads")
    settings: dict[str, Any] = {key: configured[key] for key in keys if key in configured}
    settings["decodeThreads"] = args.decode_threads
    cores = os.cpu_count() or 1
    load = LoadSpec(concurrency=args.clients, warmup_s=args.warmup, measure_s=args.duration)
    photos = {size: photo_jpegs(*PHOTO_SIZES[size], args.photos) for size in sizes}
    rows: list[Row] = []
    decode: dict[tuple[str, str], float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-photos-") as tmp:
        work = Path(tmp)
        print("[bench] exporting the ImageNet-shaped model (as `tsbatch bench resnet --shape imagenet`) ...")
        target = imagenet_spec(manifest.model(model), work, compiled=not args.torchscript)
        variant = default_variant(target.artifact_dir, settings["batchSize"])
        served = variant_spec(target, work / "variant", variant)
        private = Manifest(
            models={model: served}, build_dir=served.build_dir, model_store=manifest.model_store
        )
        config = from_mapping(
            ImageModelConfig, artifacts.read_json(target.artifact_dir / artifacts.HANDLER_CONFIG_FILE)
        )
        for size, bodies in photos.items():
            for mode in MODES:
                decode[(size, mode)] = decode_ms(config, bodies, mode, 1.0 if len(bodies[0]) < 10**6 else 3.0)
        servers = [*MODES] + ([] if args.no_stock else [STOCK])
        for name in servers:
            if name == STOCK:
                with contextlib.redirect_stdout(io.StringIO()):
                    properties, _ = private_store(
                        work / "stock", [model], {model: settings}, manifest=private
                    )
                store = stock_store(target.artifact_dir, model, settings, work)
            else:
                with contextlib.redirect_stdout(io.StringIO()):
                    properties, store = private_store(
                        work / f"store-{name}",
                        [model],
                        {model: {**settings, REDUCED_KEY: name}},
                        manifest=private,
                    )
            server = start_instance(work / f"run-{name}", store, [model], source=properties)
            try:
                for size, bodies in photos.items():
                    print(f"[bench] {size} {name}: {args.clients} clients, {args.duration:g} s ...")
                    rows.append(measure(server, model, size, bodies, load, name))
            finally:
                server.stop()
    rows.sort(key=lambda row: (sizes.index(row.size), servers.index(row.server)))
    layout = (
        f"{variant.label}, batchSize {settings['batchSize']} / {settings['maxBatchDelay']} ms, "
        f"{settings['maxWorkers']} worker x {settings['torchThreads']} torch thread, decodeThreads "
        f"{args.decode_threads}, {args.clients} clients, {args.duration:g} s per row"
    )
    print_table(rows, decode, cores, layout)
    failed = [
        row
        for row in rows
        if row.server != STOCK
        and (row.errors or not row.requests)
        and not refused_by_design(row, config.max_image_pixels)
    ]
    return 1 if failed else 0
