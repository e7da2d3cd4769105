"""A worker at int8: the gated int8 package is served; without one, TorchScript at the next
precision down, and the log says why."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from batchkit.config import ImageModelConfig, from_mapping
from batchkit.loader import agreement_problem, load_served_model
from batchkit.precision import PrecisionChoice, int8_fallback

CPU = torch.device("cpu")
INT8 = PrecisionChoice("int8", "test")


def load(model_dir: Path, handler: dict):
    config = from_mapping(ImageModelConfig, handler)
    check = (torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(0)),)
    return load_served_model(config, model_dir, CPU, INT8, 4, check)


@pytest.fixture
def int8_model_dir(tiny_image_model_dir, tiny_int8_package: Path):
    model_dir, config = tiny_image_model_dir
    shutil.copy2(tiny_int8_package, model_dir / tiny_int8_package.name)
    config["handler"].update(compiled_models=[tiny_int8_package.name], compiled_max_batch_size=4)
    return model_dir, config


def test_the_int8_package_is_served(int8_model_dir, caplog) -> None:
    caplog.set_level("INFO")
    model_dir, config = int8_model_dir
    served = load(model_dir, config["handler"])
    assert (served.runtime, served.precision, served.source) == ("aoti", "int8", "model.cpu-int8.pt2")
    with torch.inference_mode():
        logits = served(torch.randn(3, 3, 16, 16))
    assert logits.shape == (3, 3) and logits.dtype == torch.float32
    assert "serving aoti int8 from model.cpu-int8.pt2" in caplog.text


def test_without_an_int8_package_torchscript_serves_the_next_precision(tiny_image_model_dir, caplog) -> None:
    model_dir, config = tiny_image_model_dir
    served = load(model_dir, config["handler"])
    assert served.runtime == "torchscript" and served.precision == int8_fallback()
    assert (
        "no usable int8 package (the archive has no model.cpu-int8.pt2 that passed the build gates) and "
        f"int8 has no TorchScript form: serving TorchScript at {int8_fallback()}"
    ) in caplog.text


def test_runtime_torchscript_at_int8_falls_back_as_well(int8_model_dir, caplog) -> None:
    model_dir, config = int8_model_dir
    served = load(model_dir, {**config["handler"], "runtime": "torchscript"})
    assert served.runtime == "torchscript" and served.precision in ("bf16", "fp32")


def test_int8_is_checked_for_finite_answers_not_against_fp32_on_noise() -> None:
    reference = torch.tensor([[2.0, 0.0]])
    assert agreement_problem(reference, torch.tensor([[0.0, 2.0]]), "int8") is None  # noise: no verdict
    assert "not finite" in (agreement_problem(reference, torch.tensor([[float("nan"), 0.0]]), "int8") or "")
    assert "not finite" in (agreement_problem(reference, torch.zeros(1, 3), "int8") or "")
