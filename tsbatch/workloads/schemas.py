"""Response-body checks: a 200 whose body is not the model's documented answer is a failure.

Each check returns a list of problems (empty when the body is right), so a failed request
in Locust's report says exactly what was wrong with it. The answer of each model kind is
checked by its workload (``tsbatch/kinds/<kind>/workload.py``), from the parts here.
"""

from __future__ import annotations

import json
from typing import Any

from tsbatch.workloads.workload import AnswerCheck


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def probability_problems(where: str, value: Any) -> list[str]:
    if not is_number(value):
        return [f"{where} is {type(value).__name__}, expected a number"]
    if not 0.0 <= float(value) <= 1.0:
        return [f"{where} = {value} is outside [0, 1]"]
    return []


def sorted_desc_problems(where: str, probabilities: list[Any]) -> list[str]:
    numbers = [float(p) for p in probabilities if is_number(p)]
    if numbers != sorted(numbers, reverse=True):
        return [f"{where} are not sorted by probability, highest first"]
    return []


def object_problems(body: Any, required: dict[str, type | tuple[type, ...]]) -> list[str]:
    if not isinstance(body, dict):
        return [f"body is {type(body).__name__}, expected a JSON object"]
    problems = []
    for key, expected in required.items():
        if key not in body:
            problems.append(f"missing {key!r}")
        elif not isinstance(body[key], expected) or (expected is not bool and isinstance(body[key], bool)):
            problems.append(f"{key!r} is {type(body[key]).__name__}")
    return problems


def error_detail(text: str | bytes | None) -> str:
    """': type: message' from our handlers' ``{"error": {...}}`` or TorchServe's own error JSON."""
    try:
        document = json.loads(text or b"")
        error = document.get("error", document) if isinstance(document, dict) else {}
        if isinstance(error, dict) and "message" in error:
            return f": {error.get('type', 'error')}: {error['message']}"
    except ValueError:
        pass
    snippet = (text.decode(errors="replace") if isinstance(text, bytes) else (text or "")).strip()[:120]
    return f": {snippet}" if snippet else ""


def body_problems(status: int, text: str | bytes | None, check: AnswerCheck) -> list[str]:
    """Everything wrong with one HTTP answer (status, JSON, and the model's ``check``)."""
    if status != 200:
        return [f"HTTP {status}{error_detail(text)}"]
    try:
        body = json.loads(text or b"")
    except ValueError:
        return ["body is not JSON"]
    return check(body)


def input_answers(body: Any) -> list[Any] | None:
    """The per-input answers of a multi-input response, whatever its protocol: ours
    (``results``), KServe v1 (``predictions`` beside no ``model``), KServe v2 (``outputs``)."""
    if not isinstance(body, dict):
        return None
    if isinstance(body.get("results"), list):
        return body["results"]
    if "model" not in body and isinstance(body.get("predictions"), list):
        return body["predictions"]
    outputs = body.get("outputs")
    if isinstance(outputs, list) and len(outputs) == 1 and isinstance(outputs[0].get("data"), list):
        try:
            return [json.loads(item) for item in outputs[0]["data"]]
        except (TypeError, ValueError):
            return None
    return None


def multi_input_problems(status: int, text: str | bytes | None, count: int, check: AnswerCheck) -> list[str]:
    """Everything wrong with the answer to a request of ``count`` inputs: each input's answer
    is checked like a single one, and an input's error is a failure."""
    if status != 200:
        return [f"HTTP {status}{error_detail(text)}"]
    try:
        answers = input_answers(json.loads(text or b""))
    except ValueError:
        return ["body is not JSON"]
    if answers is None:
        return ["no per-input answers (results, predictions or outputs)"]
    if len(answers) != count:
        return [f"{len(answers)} answers for {count} inputs"]
    return [f"input {index}: {problem}" for index, answer in enumerate(answers) for problem in check(answer)]
