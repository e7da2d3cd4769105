"""A worker at int8: the gated int8 package is served when it reproduces its own record;
without one, TorchScript at the next precision down, and the log says why."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from batchkit.config import ImageModelConfig, from_mapping
from batchkit.images import check_images
from batchkit.loader import load_compiled, load_served_model, plan_candidates
from batchkit.precision import PrecisionChoice, int8_fallback
from tsbatch.archive.compiled import check_record

CPU = torch.device("cpu")
INT8 = PrecisionChoice("int8", "test")


def load(model_dir: Path, handler: dict):
    config = from_mapping(ImageModelConfig, handler)
    return load_served_model(config, model_dir, CPU, INT8, 4, (check_images(config.crop_size),))


@pytest.fixture
def int8_model_dir(tiny_image_model_dir, tiny_int8_package: Path):
    """The tiny archive with its int8 package, recorded on the check inputs as the build does."""
    model_dir, config = tiny_image_model_dir
    shutil.copy2(tiny_int8_package, model_dir / tiny_int8_package.name)
    served = load_compiled(model_dir / tiny_int8_package.name, CPU, "int8")
    record = check_record(served, (check_images(16),))
    handler = config["handler"]
    handler.update(compiled_models=[tiny_int8_package.name], compiled_max_batch_size=4)
    handler["check_outputs"] = {**handler["check_outputs"], "aoti-cpu-int8": record}
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
    caplog.set_level("INFO")
    model_dir, config = tiny_image_model_dir
    served = load(model_dir, {**config["handler"], "runtime": "aoti"})
    assert served.runtime == "torchscript" and served.precision == int8_fallback()
    assert f"int8 has no TorchScript form: TorchScript at {int8_fallback()} next" in caplog.text


@pytest.mark.parametrize(("flags", "next_precision"), [({"avx2"}, "fp32"), ({"avx2", "amx_bf16"}, "bf16")])
def test_the_int8_fallback_follows_the_cpu(int8_model_dir, flags: set[str], next_precision: str) -> None:
    """Forced CPU flags: the plan is the same on every CPU of a kind."""
    model_dir, config = int8_model_dir
    handler = from_mapping(ImageModelConfig, {**config["handler"], "runtime": "torchscript"})
    candidates, skipped = plan_candidates(handler, model_dir, "cpu", "int8", 4, flags)
    assert candidates[0].precision == next_precision
    assert any("int8 has no TorchScript form" in reason for reason in skipped)
