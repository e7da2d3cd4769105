"""The tuner's command line: the runtime x precision a tuning run serves."""

from __future__ import annotations

import argparse

import pytest

from tsbatch.analysis.tune.cli import build_parser, parse_variant
from tsbatch.archive.variants import Variant


def test_variant_is_runtime_dash_precision() -> None:
    assert parse_variant("aoti-bf16") == Variant("aoti", "bf16")
    assert build_parser().parse_args(["--variant", "torchscript-fp32"]).variant == Variant(
        "torchscript", "fp32"
    )
    assert build_parser().parse_args([]).variant is None
    with pytest.raises(argparse.ArgumentTypeError, match="expected torchscript"):
        parse_variant("onnx-fp32")


def test_int8_is_a_candidate_only_as_its_package() -> None:
    assert parse_variant("aoti-int8") == Variant("aoti", "int8")
    with pytest.raises(argparse.ArgumentTypeError, match="use aoti-int8"):
        parse_variant("torchscript-int8")
