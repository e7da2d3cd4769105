"""The image kind's workload: its answer check names every wrong body, its sample call and
largest answer are what the handler takes and writes."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from tsbatch.kinds.image.workload import DIGIT_PNG, WORKLOAD, answer_problems, image_pool, largest_answer

ANSWER = {
    "model": "resnet18",
    "predictions": [
        {"label": "7", "index": 7, "probability": 0.9},
        {"label": "1", "index": 1, "probability": 0.1},
    ],
}


def test_a_documented_answer_passes_and_ranks() -> None:
    assert answer_problems(ANSWER, "resnet18") == []
    assert WORKLOAD.distribution(ANSWER) == {"7": 0.9, "1": 0.1}


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"model": "resnet50"}, "model is 'resnet50'"),
        ({"predictions": []}, "predictions is empty"),
        (
            {
                "predictions": [
                    {"label": "7", "index": 7, "probability": 0.1},
                    {"label": "1", "index": 1, "probability": 0.9},
                ]
            },
            "not sorted",
        ),
        ({"predictions": [{"label": 7, "index": 7, "probability": 0.9}]}, "'label' is int"),
        ({"predictions": [{"label": "7", "index": True, "probability": 0.9}]}, "'index' is bool"),
        ({"predictions": [{"label": "7", "index": 7, "probability": "high"}]}, "probability is str"),
        ({"predictions": [{"label": "7", "index": 7, "probability": 1.5}]}, "outside [0, 1]"),
    ],
)
def test_wrong_resnet_bodies_are_named(change: dict, problem: str) -> None:
    problems = answer_problems({**ANSWER, **change}, "resnet18")
    assert any(problem in p for p in problems), problems


def test_the_largest_answer_is_a_valid_one() -> None:
    answer = largest_answer("m", "x" * 40, 5)
    assert answer_problems(answer, "m") == [] and len(answer["predictions"]) == 5


def test_the_sample_call_sends_a_digit_with_a_content_type() -> None:
    lines = WORKLOAD.example("http://127.0.0.1:8080/predictions/m")
    assert lines[0] == DIGIT_PNG
    assert "Content-Type: application/octet-stream" in lines[1] and lines[1].endswith("/predictions/m")


def test_image_pool_varies_size_format_and_kind() -> None:
    pool = image_pool(seed=1, sides=(32, 256, 1024))
    assert len(pool) == 6
    decoded = [Image.open(io.BytesIO(p.body)) for p in pool]
    assert {img.format for img in decoded} == {"PNG", "JPEG", "WEBP"}
    assert {p.content_type for p in pool} == {"image/png", "image/jpeg", "image/webp"}
    assert max(max(img.size) for img in decoded) == 1024 and min(max(img.size) for img in decoded) == 32
    assert {p.description.split()[0] for p in pool} == {"digit", "photo"}
    assert [p.body for p in image_pool(seed=1, sides=(32,))] == [p.body for p in pool[:2]]
