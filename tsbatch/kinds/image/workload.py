"""What a load generator sends an image classifier and what a good answer looks like.

The pool: one digit-like drawing and one photo-like picture per long side from 32 to 1024
px, with varied aspect ratios, as PNG, JPEG and WebP. Decode and resize cost on the server
grows with size and differs per format, which a single fixed test image hides.
"""

from __future__ import annotations

import base64
import random
from typing import Any

from tsbatch.kinds.image.examples import PictureKind, encode, picture
from tsbatch.workloads.payloads import Payload
from tsbatch.workloads.schemas import object_problems, probability_problems, sorted_desc_problems
from tsbatch.workloads.workload import Workload

IMAGE_SIDES = (32, 48, 64, 96, 128, 160, 224, 256, 320, 384, 480, 512, 640, 800, 1024)
IMAGE_FORMATS = (("PNG", "image/png"), ("JPEG", "image/jpeg"), ("WEBP", "image/webp"))
PICTURE_KINDS: tuple[PictureKind, ...] = ("digit", "photo")
# Writes digit.png, a real handwritten 7 drawn dark on white as the digits model was trained
# (tsbatch.kinds.image.examples.ink_pictures), for the sample call.
DIGIT_PNG = (
    ".venv/bin/python -c 'from PIL import Image; from sklearn.datasets import load_digits; "
    'Image.fromarray((255 - load_digits().images[7] * 255 / 16).astype("uint8")).resize((32, 32)).save("digit.png")\''
)


def answer_problems(body: Any, model: str) -> list[str]:
    """``{"model", "predictions": [{"label": str, "index": int, "probability": float}, ...]}``, sorted."""
    problems = object_problems(body, {"model": str, "predictions": list})
    if problems:
        return problems
    if body["model"] != model:
        problems.append(f"model is {body['model']!r}, expected {model!r}")
    predictions = body["predictions"]
    if not predictions:
        problems.append("predictions is empty")
    for index, item in enumerate(predictions):
        where = f"predictions[{index}]"
        item_problems = object_problems(item, {"label": str, "index": int})
        problems.extend(f"{where}: {p}" for p in item_problems)
        if not isinstance(item, dict):
            continue
        problems.extend(probability_problems(f"{where}.probability", item.get("probability")))
    if not problems:
        problems.extend(sorted_desc_problems("predictions", [p["probability"] for p in predictions]))
    return problems


def largest_answer(model: str, label: str, top_k: int) -> dict[str, Any]:
    """An answer of ``top_k`` predictions of ``label``, as large as the handler writes one."""
    entry = {"label": label, "index": 99999, "probability": 0.123456789}
    return {"model": model, "predictions": [entry] * top_k}


def image_pool(seed: int = 0, sides: tuple[int, ...] = IMAGE_SIDES) -> list[Payload]:
    """One digit drawing and one photo-like image per long side, formats rotating."""
    rng = random.Random(seed)
    pool = []
    for index, side in enumerate(sides):
        for kind_index, kind in enumerate(PICTURE_KINDS):
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


def pool(seed: int) -> list[Payload]:
    """Digit drawings and photo-like pictures of many sizes, as PNG, JPEG and WebP."""
    return image_pool(seed=seed)


def input_value(payload: Payload) -> str:
    """An image as one element of a several-input body: base64."""
    return base64.b64encode(payload.body).decode()


def example(url: str) -> list[str]:
    """Image bytes go with a Content-Type: without one the frontend form-decodes them."""
    return [
        DIGIT_PNG,
        f"curl -H \"Authorization: Bearer $TOKEN\" -H 'Content-Type: application/octet-stream' "
        f"--data-binary @digit.png {url}",
    ]


WORKLOAD = Workload(
    pool=pool,
    check=answer_problems,
    ranking=("predictions", "index"),
    example=example,
    list_key="images",
    input_value=input_value,
)
