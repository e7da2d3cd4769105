"""The tuner's command line: the serving candidate a tuning run serves, and its early errors."""

from __future__ import annotations

import argparse

import pytest

from batchkit.candidates import ServingCandidate
from tsbatch.analysis.tune.cli import build_parser, main, parse_variant


def test_variant_is_a_serving_candidate_name() -> None:
    assert parse_variant("aoti-cpu-bf16") == ServingCandidate("aoti", "cpu", "bf16")
    assert build_parser().parse_args(["--variant", "torchscript-fp32"]).variant == ServingCandidate(
        "torchscript", "cpu", "fp32"
    )
    assert build_parser().parse_args([]).variant is None
    with pytest.raises(argparse.ArgumentTypeError, match="is not a serving candidate"):
        parse_variant("onnx-cpu-fp32-x")
    with pytest.raises(argparse.ArgumentTypeError, match="'onnx' is not one of"):
        parse_variant("onnx-fp32")


def test_int8_is_a_candidate_only_as_its_package() -> None:
    assert parse_variant("aoti-cpu-int8") == ServingCandidate("aoti", "cpu", "int8")
    with pytest.raises(argparse.ArgumentTypeError, match="int8 exists only as a compiled package"):
        parse_variant("torchscript-int8")


def test_a_missing_config_is_one_clear_error_before_any_point(tmp_path, capsys) -> None:
    """Outside a checkout (a plain `pip install .`), no point can start a server: say so once."""
    assert (
        main(["--mar", str(tmp_path / "any.mar"), "--properties", str(tmp_path / "config.properties")]) == 1
    )
    error = capsys.readouterr().err
    assert "no config.properties at" in error and "--properties FILE" in error


def test_apply_live_is_for_manifest_models(tmp_path, capsys) -> None:
    """A --mar winner has no manifest entry to package from: refused before any point runs."""
    assert main(["--mar", str(tmp_path / "any.mar"), "--apply-live", str(tmp_path)]) == 1
    assert "--apply-live packages manifest models" in capsys.readouterr().err


def test_apply_live_defaults_to_the_serve_run_dir() -> None:
    assert build_parser().parse_args(["--apply-live"]).apply_live.name == ".serve"
    assert build_parser().parse_args([]).apply_live is None
