"""A worker at int8: the gated int8 package is served when it reproduces its own record;
when it is unusable, the next fastest candidate the build timed (by flags without timings),
and the reasons say why."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from batchkit.config import from_mapping
from batchkit.loader import load_compiled, load_served_model
from batchkit.precision import cpu_identity
from image_serving.config import ImageModelConfig
from image_serving.images import check_images
from tsbatch.archive.compiled import check_record

CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def no_environment_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TSBATCH_PRECISION", raising=False)


def load(model_dir: Path, handler: dict):
    config = from_mapping(ImageModelConfig, {"precision": "int8", **handler})
    return load_served_model(config, model_dir, CPU, 4, (check_images(config.crop_size),))


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


def test_the_int8_package_is_served(int8_model_dir) -> None:
    model_dir, config = int8_model_dir
    served = load(model_dir, config["handler"])
    assert (served.runtime, served.precision, served.source) == ("aoti", "int8", "model.cpu-int8.pt2")
    with torch.inference_mode():
        logits = served(torch.randn(3, 3, 16, 16))
    assert logits.shape == (3, 3) and logits.dtype == torch.float32
    assert served.decision()["why"][0]["code"] == "precision-set"


def test_an_unloadable_int8_package_falls_back_to_the_next_fastest_timed(int8_model_dir) -> None:
    """Timed on this CPU model: int8, then bf16 TorchScript, then fp16 TorchScript, fp32 last."""
    model_dir, config = int8_model_dir
    (model_dir / "model.cpu-int8.pt2").write_bytes(b"not a zip archive")
    ms = {"aoti-cpu-int8": 1.0, "torchscript-fp16": 3.0, "torchscript-bf16": 2.0, "torchscript-fp32": 10.0}
    timings = {"cpu_model": cpu_identity(), "batch_size": 4, "ms": ms}
    served = load(model_dir, {**config["handler"], "precision": "auto", "timings_ms": timings})
    assert (served.runtime, served.precision) == ("torchscript", "bf16")
    codes = [reason.code for reason in served.reasons]
    assert codes[0] == "measured" and codes[-1] == "not-served"
    assert served.reasons[-1].detail.startswith("aoti-cpu-int8 did not load")


def test_without_an_int8_package_torchscript_serves_by_the_flags(tiny_image_model_dir) -> None:
    model_dir, config = tiny_image_model_dir
    served = load(model_dir, {**config["handler"], "runtime": "aoti"})
    assert served.runtime == "torchscript" and served.precision in ("bf16", "fp32")
    (fallback,) = [reason for reason in served.reasons if reason.code == "int8-fallback"]
    assert fallback.detail == f"int8 has no TorchScript form: {served.precision} next (CPU flags)"
