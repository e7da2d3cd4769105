"""Serving the compiled package, and each way back to TorchScript."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from batchkit.config import ImageModelConfig, from_mapping
from batchkit.loader import AUTO_MARGIN, agreement_problem, load_served_model
from batchkit.precision import PrecisionChoice

CPU = torch.device("cpu")
FP32 = PrecisionChoice("fp32", "test")


def check_input() -> tuple[torch.Tensor]:
    return (torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(0)),)


def load(model_dir: Path, handler: dict, choice: PrecisionChoice = FP32, max_batch_size: int = 4):
    config = from_mapping(ImageModelConfig, handler)
    return load_served_model(config, model_dir, CPU, choice, max_batch_size, check_input())


def test_compiled_package_is_served_and_agrees_with_torchscript(tiny_compiled_model_dir, caplog) -> None:
    caplog.set_level("INFO")
    model_dir, config = tiny_compiled_model_dir
    served = load(model_dir, config["handler"])
    assert (served.runtime, served.precision, served.source) == ("aoti", "fp32", "model.cpu-fp32.pt2")
    assert "serving aoti fp32 from model.cpu-fp32.pt2 (loaded in" in caplog.text
    reference = torch.jit.load(str(model_dir / "model.pt"))
    with torch.inference_mode():
        for size in (1, 3, 4):
            images = torch.randn(size, 3, 16, 16)
            assert torch.allclose(served(images), reference(images), atol=1e-4)


def test_a_batch_larger_than_the_export_bound_runs_in_slices(tiny_compiled_model_dir) -> None:
    """Multi-input requests can flatten into more inputs than batchSize: the package,
    exported for 4, still answers 10, each as it would alone."""
    model_dir, config = tiny_compiled_model_dir
    served = load(model_dir, config["handler"])
    assert served.runtime == "aoti" and served.max_batch == 4
    images = torch.randn(10, 3, 16, 16)
    with torch.inference_mode():
        together = served(images)
        alone = torch.cat([served(image[None]) for image in images])
    assert together.shape[0] == 10
    assert torch.allclose(together, alone, atol=1e-4)


def test_a_non_contiguous_input_gets_the_same_answer_from_the_package(tiny_compiled_model_dir) -> None:
    model_dir, config = tiny_compiled_model_dir
    served = load(model_dir, config["handler"])
    images = torch.randn(3, 3, 16, 16)
    with torch.inference_mode():
        expected = served(images).clone()
        assert torch.allclose(served(images.to(memory_format=torch.channels_last)), expected, atol=1e-5)


def test_no_package_serves_torchscript(tiny_image_model_dir, caplog) -> None:
    caplog.set_level("INFO")
    model_dir, config = tiny_image_model_dir
    served = load(model_dir, config["handler"])
    assert served.runtime == "torchscript" and served.source == "model.pt"
    assert "serving TorchScript: the archive has no model.cpu-fp32.pt2" in caplog.text


def test_package_that_fails_to_load_falls_back_with_a_warning(tiny_compiled_model_dir, caplog) -> None:
    model_dir, config = tiny_compiled_model_dir
    (model_dir / "model.cpu-fp32.pt2").write_bytes(b"not a zip archive")
    served = load(model_dir, config["handler"])
    assert served.runtime == "torchscript"
    assert "serving TorchScript: model.cpu-fp32.pt2 did not load" in caplog.text


def test_batch_size_beyond_the_export_bound_serves_torchscript(tiny_compiled_model_dir, caplog) -> None:
    model_dir, config = tiny_compiled_model_dir
    assert load(model_dir, config["handler"], max_batch_size=8).runtime == "torchscript"
    assert "batch size 8 exceeds the 4 model.cpu-fp32.pt2 was exported for" in caplog.text


def test_runtime_torchscript_skips_the_package(tiny_compiled_model_dir) -> None:
    model_dir, config = tiny_compiled_model_dir
    assert load(model_dir, {**config["handler"], "runtime": "torchscript"}).runtime == "torchscript"


def test_reduced_precision_torchscript_runs_in_bf16(tiny_image_model_dir) -> None:
    model_dir, config = tiny_image_model_dir
    served = load(model_dir, config["handler"], PrecisionChoice("bf16", "test"))
    assert (served.runtime, served.precision) == ("torchscript", "bf16")
    with torch.inference_mode():
        assert served(*check_input()).dtype == torch.float32  # bf16 inside, fp32 out


def test_a_candidate_that_failed_its_gate_is_not_served(tiny_image_model_dir, caplog) -> None:
    model_dir, config = tiny_image_model_dir
    handler = {**config["handler"], "failed_gates": ["torchscript-bf16"]}
    served = load(model_dir, handler, PrecisionChoice("bf16", "test"))
    assert served.precision == "fp32"
    assert "TorchScript at bf16 not served (torchscript-bf16 failed the build gates)" in caplog.text


@pytest.mark.parametrize(
    ("candidate", "precision", "problem"),
    [
        (torch.tensor([[2.0, 0.0]]), "fp32", None),
        (torch.tensor([[2.0, 0.1]]), "fp32", "probabilities differ"),
        (torch.tensor([[2.0, 0.01]]), "bf16", None),
        (torch.tensor([[0.0, 2.0]]), "bf16", "probabilities differ"),
    ],
)
def test_agreement_tolerance_depends_on_precision(candidate, precision, problem) -> None:
    found = agreement_problem(torch.tensor([[2.0, 0.0]]), candidate, precision)
    assert (found is None) if problem is None else (problem in (found or ""))


def test_auto_at_fp32_times_the_package_against_torchscript_and_serves_the_faster(
    tiny_compiled_model_dir, caplog
) -> None:
    caplog.set_level("INFO")
    model_dir, config = tiny_compiled_model_dir
    served = load(model_dir, {**config["handler"], "runtime": "auto"})
    timed = re.search(
        r"runtime auto: model.cpu-fp32.pt2 ([\d.]+) ms, TorchScript ([\d.]+) ms per batch of 4", caplog.text
    )
    assert timed, caplog.text
    compiled_ms, torchscript_ms = float(timed.group(1)), float(timed.group(2))
    bound = torchscript_ms * (1 - AUTO_MARGIN)
    # The log rounds to 0.1 ms: figures that close to the bound may have gone either way.
    if abs(compiled_ms - bound) <= 0.1:
        assert served.runtime in {"aoti", "torchscript"}
    else:
        assert served.runtime == ("aoti" if compiled_ms < bound else "torchscript")
