"""What a load generator sends an image classifier and what a good answer looks like."""

from __future__ import annotations

from typing import Any

from tsbatch.workloads.payloads import Payload, image_pool
from tsbatch.workloads.schemas import object_problems, probability_problems, sorted_desc_problems
from tsbatch.workloads.workload import Workload

# Writes digit.png, a real handwritten 7 drawn dark on white as the digits model was trained
# (tsbatch.workloads.images.ink_pictures), for the sample call.
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


def pool(seed: int) -> list[Payload]:
    """Digit drawings and photo-like pictures of many sizes, as PNG, JPEG and WebP."""
    return image_pool(seed=seed)


def example(url: str) -> list[str]:
    """Image bytes go with a Content-Type: without one the frontend form-decodes them."""
    return [
        DIGIT_PNG,
        f"curl -H \"Authorization: Bearer $TOKEN\" -H 'Content-Type: application/octet-stream' "
        f"--data-binary @digit.png {url}",
    ]


WORKLOAD = Workload(pool=pool, check=answer_problems, ranking=("predictions", "index"), example=example)
