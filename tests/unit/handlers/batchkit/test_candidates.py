"""A serving candidate's four spellings come from one type and parse back to it."""

from __future__ import annotations

import pytest

from batchkit.candidates import BASELINE, ServingCandidate


def test_a_package_candidate_has_every_spelling() -> None:
    bf16 = ServingCandidate("aoti", "cpu", "bf16")
    assert (bf16.name, bf16.target, bf16.file_name, bf16.label) == (
        "aoti-cpu-bf16",
        "cpu-bf16",
        "model.cpu-bf16.pt2",
        "aoti bf16",
    )
    for spelling in (bf16.name, bf16.target, bf16.file_name):
        assert ServingCandidate.parse(spelling) == bf16


def test_torchscript_is_named_without_a_device_and_parsed_onto_one() -> None:
    assert (BASELINE.name, BASELINE.file_name, BASELINE.label) == (
        "torchscript-fp32",
        "model.pt",
        "torchscript fp32",
    )
    assert ServingCandidate.parse("torchscript-bf16", "cuda") == ServingCandidate(
        "torchscript", "cuda", "bf16"
    )
    assert ServingCandidate.parse("model.cuda-fp16.pt2").device == "cuda"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("torchscript-int8", "int8 exists only as a compiled package"),
        ("aoti-tpu-bf16", "'tpu' is not one of"),
        ("cpu-fp64", "'fp64' is not one of"),
        ("model.pt", "is not a serving candidate"),
    ],
)
def test_a_wrong_spelling_says_what_is_expected(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ServingCandidate.parse(text)
