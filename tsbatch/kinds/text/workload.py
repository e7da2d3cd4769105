"""What a load generator sends a text intent classifier and what a good answer looks like."""

from __future__ import annotations

from typing import Any

from tsbatch.workloads.payloads import Payload, text_pool
from tsbatch.workloads.schemas import object_problems, probability_problems, sorted_desc_problems
from tsbatch.workloads.utterances import read_utterances
from tsbatch.workloads.workload import Workload

SAMPLE_TEXT = "I lost my credit card"


def answer_problems(body: Any, model: str) -> list[str]:
    """``{"model", "intent", "confidence", "in_scope", "top_k": [{"intent", "probability"}], "truncated"}``."""
    problems = object_problems(
        body, {"model": str, "intent": str, "in_scope": bool, "top_k": list, "truncated": bool}
    )
    if problems:
        return problems
    if body["model"] != model:
        problems.append(f"model is {body['model']!r}, expected {model!r}")
    problems.extend(probability_problems("confidence", body.get("confidence")))
    top_k = body["top_k"]
    if not top_k:
        problems.append("top_k is empty")
    for index, item in enumerate(top_k):
        where = f"top_k[{index}]"
        problems.extend(f"{where}: {p}" for p in object_problems(item, {"intent": str}))
        if isinstance(item, dict):
            problems.extend(probability_problems(f"{where}.probability", item.get("probability")))
    if not problems:
        problems.extend(sorted_desc_problems("top_k", [item["probability"] for item in top_k]))
    return problems


def largest_answer(model: str, label: str, top_k: int) -> dict[str, Any]:
    """An answer of ``top_k`` intents named ``label``, as large as the handler writes one."""
    entry = {"intent": label, "probability": 0.123456789}
    answer = {"model": model, "intent": label, "confidence": 0.123456789, "in_scope": False}
    return answer | {"top_k": [entry] * top_k, "truncated": False}


def pool(seed: int) -> list[Payload]:
    """Our held-out utterances, as text/plain and JSON, a few joined past max_length."""
    return text_pool(read_utterances(), seed=seed)


def example(url: str) -> list[str]:
    return [
        f"curl -H \"Authorization: Bearer $TOKEN\" -H 'Content-Type: text/plain' --data '{SAMPLE_TEXT}' {url}"
    ]


WORKLOAD = Workload(pool=pool, check=answer_problems, ranking=("top_k", "intent"), example=example)
