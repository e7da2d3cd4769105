"""Realistic request bodies, built once per load-generator process.

Images for resnet18 (see ``images``): one digit-like drawing and one photo-like picture
per long side from 32 to 1024 px, with varied aspect ratios, as PNG, JPEG and WebP.
Decode and resize cost on the server grows with size and differs per format, which a
single fixed test image hides.

Utterances for bert_intent (see ``utterances``), mostly as text/plain and some as JSON
``{"text": ...}``; a few are several utterances joined, longer than the model's
max_length, so truncation is on the tested path too.
"""

from __future__ import annotations

import base64
import itertools
import json
import random
from dataclasses import dataclass

from tsbatch.workloads.images import PictureKind, encode, picture

IMAGE_SIDES = (32, 48, 64, 96, 128, 160, 224, 256, 320, 384, 480, 512, 640, 800, 1024)
IMAGE_FORMATS = (("PNG", "image/png"), ("JPEG", "image/jpeg"), ("WEBP", "image/webp"))
IMAGE_KINDS: tuple[PictureKind, ...] = ("digit", "photo")
# The request bodies that carry several inputs, in the order multi-input pools rotate them.
MULTI_INPUT_PROTOCOLS = ("list", "kserve_v1", "kserve_v2")


@dataclass(frozen=True)
class Payload:
    body: bytes
    content_type: str
    description: str  # e.g. "digit 96x64 PNG": shown in failure messages


def image_pool(seed: int = 0, sides: tuple[int, ...] = IMAGE_SIDES) -> list[Payload]:
    """One digit drawing and one photo-like image per long side, formats rotating."""
    rng = random.Random(seed)
    pool = []
    for index, side in enumerate(sides):
        for kind_index, kind in enumerate(IMAGE_KINDS):
            aspect = rng.uniform(0.6, 1.6) if side > 32 else 1.0
            width, height = (
                (side, max(16, round(side / aspect)))
                if aspect >= 1
                else (max(16, round(side * aspect)), side)
            )
            image = picture(kind, rng, width, height)
            fmt, content_type = IMAGE_FORMATS[(index + kind_index) % len(IMAGE_FORMATS)]
            body = encode(image, fmt, quality=rng.randint(70, 95))
            pool.append(Payload(body, content_type, f"{kind} {width}x{height} {fmt}"))
    return pool


def text_pool(
    texts: list[str], seed: int = 0, json_share: float = 0.2, long_share: float = 0.05
) -> list[Payload]:
    """Every utterance once (text/plain or JSON), plus joined ones longer than the model's max_length."""
    rng = random.Random(seed)
    pool = []
    for text in texts:
        if rng.random() < json_share:
            pool.append(
                Payload(json.dumps({"text": text}).encode(), "application/json", f"json {len(text)} chars")
            )
        else:
            pool.append(Payload(text.encode("utf-8"), "text/plain; charset=utf-8", f"text {len(text)} chars"))
    for _ in range(max(1, round(len(texts) * long_share))):
        joined = ". ".join(rng.sample(texts, k=min(len(texts), rng.randint(6, 12))))
        pool.append(
            Payload(joined.encode("utf-8"), "text/plain; charset=utf-8", f"long text {len(joined)} chars")
        )
    rng.shuffle(pool)
    return pool


def input_value(payload: Payload) -> str:
    """A single-input payload as one element of a multi-input body: base64 for an image,
    the text itself for an utterance."""
    if payload.content_type.startswith("image/"):
        return base64.b64encode(payload.body).decode()
    if payload.content_type == "application/json":
        return json.loads(payload.body)["text"]
    return payload.body.decode("utf-8")


def multi_input_body(values: list[str], list_key: str, protocol: str) -> bytes:
    """One request carrying ``values`` in our list schema, KServe v1 or KServe v2."""
    if protocol == "list":
        document: object = {list_key: values}
    elif protocol == "kserve_v1":
        document = {"instances": values}
    else:
        document = {
            "inputs": [{"name": list_key, "datatype": "BYTES", "shape": [len(values)], "data": values}]
        }
    return json.dumps(document).encode()


def multi_input_pool(pool: list[Payload], per_request: int) -> list[Payload]:
    """Requests of ``per_request`` inputs each, drawn in turn from ``pool`` and rotating the
    protocols, so every body shape and every single payload is sent."""
    list_key = "images" if pool[0].content_type.startswith("image/") else "texts"
    values = itertools.cycle([input_value(payload) for payload in pool])
    requests = []
    for index in range(max(len(MULTI_INPUT_PROTOCOLS), -(-len(pool) // per_request))):
        protocol = MULTI_INPUT_PROTOCOLS[index % len(MULTI_INPUT_PROTOCOLS)]
        chunk = [next(values) for _ in range(per_request)]
        body = multi_input_body(chunk, list_key, protocol)
        requests.append(Payload(body, "application/json", f"{protocol} x{per_request} {list_key}"))
    return requests
