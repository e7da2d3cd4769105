"""Benchmark: images/s served when each request carries several images vs one, same server.

One TorchServe with the archive's resnet18 at the settings of config.properties serves
three runs under the same concurrent clients: one image per request (raw bytes), then
``--per-request`` images per request as base64 JSON (``{"images": [base64, ...]}``) and
as the Open Inference Protocol's binary tensors (``/v2/models/resnet18/infer``, binary in
and out, as tritonclient sends by default). The batch core flattens every image of
TorchServe's batch into one forward pass, so a multi-input request shares the model with
its batch-mates' images; the difference shows what a client saves in HTTP, queueing and
worker round trips by packing its images, and what base64 costs beside raw bytes.

    tsbatch bench multi-input --per-request 8 --clients 16 --duration 15
"""

from __future__ import annotations

import argparse
import base64
import json
import tempfile
from pathlib import Path

from batchkit.binary_tensors import HEADER_LENGTH, bytes_elements, encode_elements
from tsbatch.archive.manifest import ManifestError, load_manifest, workload_for
from tsbatch.bench.model_option import add_model_option, chosen_model
from tsbatch.client.load import LoadDriver, LoadSpec, ResponseCheck
from tsbatch.client.metrics import rise_ratio
from tsbatch.kinds.image.examples import request_pictures
from tsbatch.server.process import TorchServe, start_instance
from tsbatch.settings.batch import BatchSettings
from tsbatch.workloads.schemas import body_problems, multi_input_problems

COUNTED = ["BatchesTotal", "BatchedInputsTotal"]


def single_check(model: str) -> ResponseCheck:
    answers = workload_for(model).answer_check(model)

    def check(status: int, body: bytes) -> str | None:
        return "; ".join(body_problems(status, body, answers)[:2]) or None

    return check


def multi_check(model: str, per_request: int) -> ResponseCheck:
    answers = workload_for(model).answer_check(model)

    def check(status: int, body: bytes) -> str | None:
        return "; ".join(multi_input_problems(status, body, per_request, answers)[:2]) or None

    return check


def multi_bodies(images: list[bytes], per_request: int) -> list[bytes]:
    """Requests of ``per_request`` images each, every image used in turn."""
    encoded = [base64.b64encode(image).decode() for image in images]
    return [
        json.dumps({"images": [encoded[(start + i) % len(encoded)] for i in range(per_request)]}).encode()
        for start in range(0, len(encoded), per_request)
    ]


def binary_v2_bodies(images: list[bytes], per_request: int) -> tuple[list[bytes], int]:
    """Binary v2 requests of ``per_request`` images each, binary output asked for, and the
    length of their JSON header. The load driver sends one set of headers with every body,
    so each JSON header is padded with spaces (valid JSON) to the longest one's length."""
    tensors = [
        encode_elements([images[(start + i) % len(images)] for i in range(per_request)])
        for start in range(0, len(images), per_request)
    ]
    headers = [
        json.dumps(
            {
                "inputs": [
                    {
                        "name": "image",
                        "datatype": "BYTES",
                        "shape": [per_request],
                        "parameters": {"binary_data_size": len(tensor)},
                    }
                ],
                "parameters": {"binary_data_output": True},
            }
        ).encode()
        for tensor in tensors
    ]
    width = max(len(header) for header in headers)
    return [header.ljust(width) + tensor for header, tensor in zip(headers, tensors, strict=True)], width


def binary_v2_check(model: str, per_request: int) -> ResponseCheck:
    """The multi-input check on a binary v2 answer, its output elements read back to JSON."""
    check = multi_check(model, per_request)

    def binary(status: int, body: bytes) -> str | None:
        if status != 200:
            return check(status, body)
        try:
            header, length = json.JSONDecoder().raw_decode(body.decode("latin-1"))
            (output,) = header["outputs"]
            elements = bytes_elements(body[length:], output["shape"][0], output["name"], ValueError)
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            return f"not a binary v2 answer: {exc}"
        output["data"] = [element.decode("utf-8") for element in elements]
        return check(status, json.dumps(header).encode())

    return binary


def measure(server: TorchServe, driver: LoadDriver, load: LoadSpec, per_request: int) -> dict:
    model = driver.model
    before = server.settled_counters(model, COUNTED)
    figures = driver.run(load).figures()
    after = server.settled_counters(model, COUNTED)
    per_batch = rise_ratio(before, after, "BatchedInputsTotal", "BatchesTotal")
    rps = figures.throughput_rps or 0.0
    return {
        "per_request": per_request,
        "rps": rps,
        "images_per_s": rps * per_request,
        "p50_ms": figures.p50_ms if figures.p50_ms is not None else float("nan"),
        "p99_ms": figures.p99_ms if figures.p99_ms is not None else float("nan"),
        "errors": figures.failures,
        "completed": figures.requests,
        "images_per_batch": float("nan") if per_batch is None else per_batch,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Compare images/s served with one image per request against several per request "
        "(base64 JSON and binary v2 tensors), on the same server and clients."
    )
    parser.add_argument("--per-request", type=int, default=8, help="images per multi-input request")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration", type=float, default=15.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=3.0)
    add_model_option(parser, "image")
    args = parser.parse_args(argv)
    manifest = load_manifest()
    try:
        model = chosen_model(args.model, "image", manifest)
    except ManifestError as exc:
        parser.error(str(exc))

    images = request_pictures(64, "digits")
    url_path = f"/predictions/{model}"
    load = LoadSpec(concurrency=args.clients, warmup_s=args.warmup, measure_s=args.duration)
    with tempfile.TemporaryDirectory(prefix="bench-multi-input-") as tmp:
        server = start_instance(Path(tmp) / "run", manifest.model_store, [model])
        try:
            settings = BatchSettings.described(server.client.describe(model))
            url = f"{server.url('inference')}{url_path}"
            single = LoadDriver(
                url,
                images,
                content_types="image/png",
                headers=server.client.headers(),
                model=model,
                check=single_check(model),
            )
            multi = LoadDriver(
                url,
                multi_bodies(images, args.per_request),
                content_types="application/json",
                headers=server.client.headers(),
                model=model,
                check=multi_check(model, args.per_request),
            )
            binary_bodies, header_length = binary_v2_bodies(images, args.per_request)
            binary = LoadDriver(
                f"{server.url('inference')}/v2/models/{model}/infer",
                binary_bodies,
                headers={**server.client.headers(), HEADER_LENGTH: str(header_length)},
                model=model,
                check=binary_v2_check(model, args.per_request),
            )
            print(f"[bench] {model}: 1 and {args.per_request} images per request, {args.clients} clients ...")
            rows = [
                {"body": "raw bytes", **measure(server, single, load, 1)},
                {"body": "JSON base64", **measure(server, multi, load, args.per_request)},
                {"body": "binary v2", **measure(server, binary, load, args.per_request)},
            ]
        finally:
            server.stop()

    print(
        f"\n{model} (archive), images per request (batchSize={settings.batch_size}, "
        f"maxBatchDelay={settings.max_batch_delay_ms} ms, {args.clients} clients, {args.duration:.0f}s measured each)"
    )
    print(
        f"{'body':<13}{'images/request':>15}{'req/s':>9}{'images/s':>10}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'errors':>8}{'images/batch':>14}"
    )
    for row in rows:
        print(
            f"{row['body']:<13}{row['per_request']:>15d}{row['rps']:>9.1f}{row['images_per_s']:>10.1f}"
            f"{row['p50_ms']:>9.1f}{row['p99_ms']:>9.1f}{row['errors']:>8d}{row['images_per_batch']:>14.1f}"
        )
    raw = max(rows[0]["images_per_s"], 1e-9)
    print(
        f"images/s ratio to raw bytes at 1 per request: JSON base64 x{args.per_request} "
        f"{rows[1]['images_per_s'] / raw:.2f}, binary v2 x{args.per_request} {rows[2]['images_per_s'] / raw:.2f}"
    )
    return 1 if any(row["errors"] or not row["completed"] for row in rows) else 0
