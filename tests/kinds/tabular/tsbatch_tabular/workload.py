"""What a load generator sends a tabular classifier and what a good answer looks like.

The pool: rows of the default width (``TabularModelConfig.num_features``), mostly one row
as ``{"features": [...]}`` and some as a one-element list; a pool is per kind, so a model
of another width takes its rows from ``--requests``.
"""

from __future__ import annotations

import json
import random
from typing import Any

from tabular_serving.config import TabularModelConfig

from tsbatch.workloads.payloads import Payload
from tsbatch.workloads.schemas import object_problems, probability_problems, sorted_desc_problems
from tsbatch.workloads.workload import Workload

WIDTH = TabularModelConfig.num_features
JSON = "application/json"


def answer_problems(body: Any, model: str) -> list[str]:
    """``{"model", "predictions": [{"label", "index", "probability"}]}``, highest first."""
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
        problems.extend(f"{where}: {p}" for p in object_problems(item, {"label": str, "index": int}))
        if isinstance(item, dict):
            problems.extend(probability_problems(f"{where}.probability", item.get("probability")))
    if not problems:
        problems.extend(sorted_desc_problems("predictions", [item["probability"] for item in predictions]))
    return problems


def largest_answer(model: str, label: str, top_k: int) -> dict[str, Any]:
    """An answer of ``top_k`` classes named ``label``, as large as the handler writes one."""
    return {"model": model, "predictions": [{"label": label, "index": 999, "probability": 0.123456}] * top_k}


def pool(seed: int, size: int = 256) -> list[Payload]:
    rng = random.Random(seed)
    payloads = []
    for _ in range(size):
        row = {"features": [round(rng.gauss(0.0, 3.0), 4) for _ in range(WIDTH)]}
        body = [row] if rng.random() < 0.2 else row
        payloads.append(Payload(json.dumps(body).encode(), JSON, f"row of {WIDTH}"))
    return payloads


def input_value(payload: Payload) -> str:
    """A row as one element of a several-input body: its features as a JSON string."""
    body = json.loads(payload.body)
    return json.dumps((body[0] if isinstance(body, list) else body)["features"])


def example(url: str) -> list[str]:
    row = json.dumps({"features": [0.5] * WIDTH})
    return [f"curl -H \"Authorization: Bearer $TOKEN\" -H 'Content-Type: {JSON}' --data '{row}' {url}"]


WORKLOAD = Workload(
    pool=pool,
    check=answer_problems,
    ranking=("predictions", "label"),
    example=example,
    list_key="rows",
    input_value=input_value,
)
