"""Benchmark: real photos at the sizes people send (``tsbatch bench photos``, ``make bench-photos``).

The ImageNet-shaped ResNet of ``tsbatch bench resnet --shape imagenet`` (224x224 crop, the
variant this machine serves, int8 where the build gates it) is served three ways in one
run, each loaded in turn with real photos of each size (``tsbatch.kinds.image.examples``):
our handler with reference decoding (``reducedDecode: off``), with reduced-size JPEG
decoding (``reducedDecode: on``), both at the shipped decode layout (``decodeThreads: auto``:
small pictures inline, big ones on every core), and TorchServe's stock
``image_classifier`` handler on the same TorchScript model as the baseline. Per row:
req/s, p50/p99, the server's cores used (CPU seconds of its processes over the run's wall
time), errors; per size the in-process decode time of one photo on one thread and the
decode-bound limit it sets (cores / decode time). Further decode pools
(``--decode-threads auto,1``) add reduced rows at each, and their req/s ratio to the first;
all servers stay up and ``--rounds`` measures them in turn, so drift on a shared machine
falls on every row alike (each row: its median round).

    tsbatch bench photos
    tsbatch bench photos --sizes 1920x1080,4032x3024 --duration 10
    tsbatch bench photos --sizes 1920x1080,4032x3024 --decode-threads auto,1 --modes on --no-stock --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import yaml
from PIL import Image

from batchkit.config import from_mapping
from image_serving.config import ImageModelConfig
from tsbatch.analysis.options import decode_threads_list
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import Manifest, ManifestError, load_manifest
from tsbatch.archive.package import MODEL_CONFIG_FILE, private_store
from tsbatch.archive.variants import default_variant, variant_spec
from tsbatch.bench.decoding import decode_rate
from tsbatch.bench.model_option import add_model_option, chosen_model
from tsbatch.bench.resnet import imagenet_spec
from tsbatch.client.load import LoadDriver, LoadSpec
from tsbatch.config.properties import configured_settings, read_properties
from tsbatch.kinds.image.examples import PHOTO_SIZES, photo_jpegs
from tsbatch.paths import DEFAULT_PROPERTIES
from tsbatch.server.process import TorchServe, start_instance
from tsbatch.server.served import served_decision
from tsbatch.settings.batch import ARCHIVE_KEYS, BATCH_KEYS, BatchSettings

REDUCED_KEY = "reducedDecode"  # the image worker's key for reduced-size JPEG decoding
MODES = ("off", "on")  # reference decoding, then reduced
STOCK = "stock"


@dataclass(frozen=True)
class Row:
    size: str
    server: str  # off, on or stock
    threads: int | str  # the decode pool of our handler's rows ("-" for the stock handler's)
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


def measure(
    server: TorchServe,
    model: str,
    size: str,
    bodies: list[bytes],
    load: LoadSpec,
    name: tuple[str, int | str],
) -> Row:
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
        *name,
        figures.throughput_rps or 0.0,
        nan if figures.p50_ms is None else figures.p50_ms,
        nan if figures.p99_ms is None else figures.p99_ms,
        figures.failures,
        figures.requests,
        cores,
    )


def stock_store(artifact_dir: Path, model: str, settings: BatchSettings, work: Path) -> Path:
    """A store whose ``<model>.mar`` is TorchServe's stock ``image_classifier`` on the fp32
    TorchScript model, with the same batch settings in its model-config.yaml."""
    store = work / "stock-store"
    store.mkdir(parents=True)
    config = work / MODEL_CONFIG_FILE
    config.write_text(yaml.safe_dump(settings.entry(BATCH_KEYS)))
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


def median_row(rows: list[Row]) -> Row:
    """One (size, server, pool)'s rounds as its median round by req/s; errors summed."""
    middle = sorted(rows, key=lambda row: row.rps)[(len(rows) - 1) // 2]
    return replace(
        middle, errors=sum(row.errors for row in rows), rps=statistics.median(row.rps for row in rows)
    )


def pool_ratios(rows: list[Row]) -> list[str]:
    """Each further decode pool's req/s over the first pool's, per size (reduced rows)."""
    lines = []
    for row in rows:
        first = next(r for r in rows if (r.size, r.server) == (row.size, row.server))
        if first is not row and first.rps:
            lines.append(
                f"{row.size} {row.server}: decodeThreads {row.threads} / {first.threads} = {row.rps / first.rps:.2f}"
            )
    return lines


def print_table(rows: list[Row], decode: dict[tuple[str, str], float], cores: int, layout: str) -> None:
    print(f"\nReal photos served ({layout}); stock = TorchServe's image_classifier, fp32 TorchScript")
    print(
        f"{'photo':<11}{'server':<8}{'pool':>5}{'req/s':>8}{'p50 ms':>8}{'p99 ms':>8}{'errors':>7}{'cores':>7}"
        f"{'decode ms':>10}{'limit req/s':>12}{'of limit':>9}{'vs stock':>9}"
    )
    for row in rows:
        stock = next((r.rps for r in rows if r.size == row.size and r.server == STOCK), 0.0)
        ms = decode.get((row.size, row.server))
        limit = cores * 1000 / ms if ms else None
        print(
            f"{row.size:<11}{row.server:<8}{row.threads!s:>5}{row.rps:>8.1f}{row.p50_ms:>8.0f}{row.p99_ms:>8.0f}"
            f"{row.errors:>7d}{row.cores:>7.2f}{(f'{ms:.1f}' if ms else '-'):>10}"
            f"{(f'{limit:.0f}' if limit else '-'):>12}{(f'{row.rps / limit:.0%}' if limit else '-'):>9}"
            f"{(f'{row.rps / stock:.2f}x' if stock and row.server != STOCK else '-'):>9}"
        )
    print(
        f"decode ms: one photo decoded and cropped in process on one thread; limit: this machine's "
        f"decode-bound rate ({cores} cores / decode time); cores: the server's CPU seconds over wall time; "
        "pool: decodeThreads."
    )
    for line in pool_ratios(rows):
        print(f"req/s ratio, measured in turn in this run: {line}")


def start_servers(
    stack: contextlib.ExitStack, work: Path, model: str, settings: BatchSettings, names: list[tuple[str, int | str]],
    private: Manifest, artifact_dir: Path,
) -> dict[tuple[str, int | str], TorchServe]:  # fmt: skip
    """Every server of the run, each stopped when ``stack`` closes."""
    servers = {}
    for index, (name, threads) in enumerate(names):
        if name == STOCK:
            with contextlib.redirect_stdout(io.StringIO()):
                changes = {model: settings.entry(ARCHIVE_KEYS)}
                properties, _ = private_store(work / "stock", [model], changes, manifest=private)
            store = stock_store(artifact_dir, model, settings, work)
        else:
            with contextlib.redirect_stdout(io.StringIO()):
                properties, store = private_store(
                    work / f"store-{index}",
                    [model],
                    {model: {**settings.entry(ARCHIVE_KEYS), REDUCED_KEY: name, "decodeThreads": threads}},
                    manifest=private,
                )
        server = start_instance(work / f"run-{index}", store, [model], source=properties)
        stack.callback(server.stop)
        servers[(name, threads)] = server
    return servers


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
        "--decode-threads",
        type=decode_threads_list,
        default=["auto"],
        help="decode pools per worker, e.g. auto,1: every row at the first (default auto, as shipped), "
        "reduced rows at each further one, with their req/s ratio to the first",
    )
    parser.add_argument(
        "--modes", default=",".join(MODES), help="reducedDecode values served: off (reference), on (reduced)"
    )
    parser.add_argument("--rounds", type=int, default=1, help="measure every row this many times, in turn")
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
    modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    if not modes or any(mode not in MODES for mode in modes):
        parser.error(f"--modes takes {', '.join(MODES)}, got {args.modes!r}")
    manifest = load_manifest()
    try:
        model = chosen_model(args.model, "image", manifest)
    except ManifestError as exc:
        parser.error(str(exc))
    settings = configured_settings(read_properties(DEFAULT_PROPERTIES), model)
    pools = args.decode_threads
    names: list[tuple[str, int | str]] = [(mode, pools[0]) for mode in modes]
    names += [("on", pool) for pool in pools[1:] if "on" in modes]
    names += [] if args.no_stock else [(STOCK, "-")]
    cores = os.cpu_count() or 1
    load = LoadSpec(concurrency=args.clients, warmup_s=args.warmup, measure_s=args.duration)
    photos = {size: photo_jpegs(*PHOTO_SIZES[size], args.photos) for size in sizes}
    measured: dict[tuple[str, str, int | str], list[Row]] = {}
    decode: dict[tuple[str, str], float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-photos-") as tmp, contextlib.ExitStack() as stack:
        work = Path(tmp)
        print("[bench] exporting the ImageNet-shaped model (as `tsbatch bench resnet --shape imagenet`) ...")
        imagenet = imagenet_spec(manifest.model(model), work, compiled=not args.torchscript)
        variant = default_variant(imagenet.artifact_dir, settings.batch_size)
        served = variant_spec(imagenet, work / "variant", variant)
        private = Manifest(
            models={model: served}, build_dir=served.build_dir, model_store=manifest.model_store
        )
        config = from_mapping(
            ImageModelConfig, artifacts.read_json(imagenet.artifact_dir / artifacts.HANDLER_CONFIG_FILE)
        )
        for size, bodies in photos.items():
            for mode in modes:
                decode[(size, mode)] = decode_ms(config, bodies, mode, 1.0 if len(bodies[0]) < 10**6 else 3.0)
        servers = start_servers(stack, work, model, settings, names, private, imagenet.artifact_dir)
        for round_ in range(args.rounds):
            for size, bodies in photos.items():
                for (name, threads), server in servers.items():
                    print(f"[bench] round {round_ + 1}: {size} {name} decodeThreads {threads} ...")
                    row = measure(server, model, size, bodies, load, (name, threads))
                    measured.setdefault((size, name, threads), []).append(row)
        chosen = {
            key: served_decision(server, model).get("decode_batches_by_threads")
            for key, server in servers.items()
            if key[0] != STOCK
        }
    rows = [median_row(rounds) for rounds in measured.values()]
    rows.sort(key=lambda row: (sizes.index(row.size), names.index((row.server, row.threads))))
    layout = (
        f"{variant.label}, batchSize {settings.batch_size} / {settings.max_batch_delay_ms} ms, "
        f"{settings.max_workers} worker x {settings.torch_threads} torch thread, decodeThreads "
        f"{', '.join(map(str, pools))}, {args.clients} clients, {args.duration:g} s per row"
        + (f", median of {args.rounds} rounds" if args.rounds > 1 else "")
    )
    print_table(rows, decode, cores, layout)
    for (name, threads), batches in chosen.items():
        print(f"{name} decodeThreads {threads}: batches decoded per thread count, all sizes: {batches}")
    failed = [
        row
        for row in rows
        if row.server != STOCK
        and (row.errors or not row.requests)
        and not refused_by_design(row, config.max_image_pixels)
    ]
    return 1 if failed else 0
