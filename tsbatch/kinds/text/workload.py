"""What a load generator sends a text intent classifier and what a good answer looks like.

The pool: our utterances (``utterances``), mostly as text/plain and some as JSON
``{"text": ...}``; a few are several utterances joined, longer than the model's
max_length, so truncation is on the tested path too.
"""

from __future__ import annotations

import json
import random
from typing import Any

from tsbatch.kinds.text.utterances import read_utterances
from tsbatch.workloads.payloads import Payload
from tsbatch.workloads.schemas import object_problems, probability_problems, sorted_desc_problems
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


def pool(seed: int) -> list[Payload]:
    """Our held-out utterances, as text/plain and JSON, a few joined past max_length."""
    return text_pool(read_utterances(), seed=seed)


def input_value(payload: Payload) -> str:
    """An utterance as one element of a several-input body: the text itself."""
    if payload.content_type == "application/json":
        return str(json.loads(payload.body)["text"])
    return payload.body.decode("utf-8")


def example(url: str) -> list[str]:
    return [
        f"curl -H \"Authorization: Bearer $TOKEN\" -H 'Content-Type: text/plain' --data '{SAMPLE_TEXT}' {url}"
    ]


WORKLOAD = Workload(
    pool=pool,
    check=answer_problems,
    ranking=("top_k", "intent"),
    example=example,
    list_key="texts",
    input_value=input_value,
)
