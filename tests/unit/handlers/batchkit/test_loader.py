"""What a worker serves: decided from the build's record, for every CPU precision x runtime."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from batchkit.config import ImageModelConfig, from_mapping
from batchkit.images import check_images
from batchkit.loader import (
    ArchiveMismatchError,
    Candidate,
    load_compiled,
    load_served_model,
    package_mismatch,
    persistent_inductor_cache,
    plan_candidates,
    unchecked_reason,
)
from batchkit.precision import PrecisionChoice
from batchkit.tolerance import probabilities_disagree
from tests.conftest import TINY_CROP

CPU = torch.device("cpu")
FP32 = PrecisionChoice("fp32", "test")


def load(model_dir: Path, handler: dict, choice: PrecisionChoice = FP32, max_batch_size: int = 4):
    config = from_mapping(ImageModelConfig, handler)
    check = (check_images(config.crop_size),)
    return load_served_model(config, model_dir, CPU, choice, max_batch_size, check, optimize=config.optimize)


def images(count: int) -> torch.Tensor:
    return torch.randn(count, 3, TINY_CROP, TINY_CROP, generator=torch.Generator().manual_seed(count))


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("runtime", ["aoti", "torchscript"])
def test_every_cpu_precision_and_runtime_is_served_and_answers_like_fp32(
    tiny_compiled_model_dir, runtime: str, precision: str, caplog
) -> None:
    """Forced, whatever this CPU has: bf16 and fp16 run emulated where it lacks them."""
    caplog.set_level("INFO")
    model_dir, config = tiny_compiled_model_dir
    served = load(model_dir, {**config["handler"], "runtime": runtime}, PrecisionChoice(precision, "forced"))
    expected_source = f"model.cpu-{precision}.pt2" if runtime == "aoti" else "model.pt"
    assert (served.runtime, served.precision, served.source) == (runtime, precision, expected_source)
    assert f"serving {runtime} {precision} from {expected_source}" in caplog.text
    reference = torch.jit.load(str(model_dir / "model.pt"))
    with torch.inference_mode():
        got = torch.softmax(served(images(3)), dim=-1)
        want = torch.softmax(reference(images(3)), dim=-1)
    assert probabilities_disagree(want, got, precision, top1=False) is None


def test_a_batch_larger_than_the_export_bound_runs_in_slices(tiny_compiled_model_dir) -> None:
    """Multi-input requests can flatten into more inputs than batchSize: the package,
    exported for 4, still answers 10, each as it would alone."""
    model_dir, config = tiny_compiled_model_dir
    served = load(model_dir, config["handler"])
    assert served.runtime == "aoti" and served.max_batch == 4
    with torch.inference_mode():
        together = served(images(10))
        alone = torch.cat([served(image[None]) for image in images(10)])
    assert together.shape[0] == 10
    assert torch.allclose(together, alone, atol=1e-4)


def test_a_non_contiguous_input_gets_the_same_answer_from_the_package(tiny_compiled_model_dir) -> None:
    model_dir, config = tiny_compiled_model_dir
    served = load(model_dir, config["handler"])
    with torch.inference_mode():
        expected = served(images(3)).clone()
        assert torch.allclose(served(images(3).to(memory_format=torch.channels_last)), expected, atol=1e-5)


def test_no_package_serves_torchscript_and_says_why_in_one_line(tiny_image_model_dir, caplog) -> None:
    caplog.set_level("INFO")
    model_dir, config = tiny_image_model_dir
    served = load(model_dir, {**config["handler"], "runtime": "aoti"})
    assert served.runtime == "torchscript" and served.source == "model.pt"
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("serving ")]
    assert "torchscript fp32 from model.pt (cold load" in line
    assert "precision fp32: test" in line and "the archive has no model.cpu-fp32.pt2" in line
    assert served.decision()["why"] == served.reasons


def test_package_that_fails_to_load_falls_back_with_a_warning(tiny_compiled_model_dir, caplog) -> None:
    model_dir, config = tiny_compiled_model_dir
    (model_dir / "model.cpu-fp32.pt2").write_bytes(b"not a zip archive")
    served = load(model_dir, config["handler"])
    assert served.runtime == "torchscript"
    assert "not serving aoti-cpu-fp32: did not load" in caplog.text


def test_a_package_that_does_not_reproduce_its_record_is_not_served(tiny_compiled_model_dir, caplog) -> None:
    model_dir, config = tiny_compiled_model_dir
    handler = config["handler"]
    records = dict(handler["check_outputs"])
    records["aoti-cpu-bf16"] = [list(reversed(row)) for row in records["aoti-cpu-bf16"]]
    served = load(model_dir, {**handler, "check_outputs": records}, PrecisionChoice("bf16", "test"))
    assert (served.runtime, served.precision) == ("torchscript", "bf16")
    assert (
        "not serving aoti-cpu-bf16: does not reproduce its build record: probabilities differ" in caplog.text
    )


def test_fp32_torchscript_that_does_not_reproduce_fails_the_worker(tiny_image_model_dir) -> None:
    model_dir, config = tiny_image_model_dir
    handler = config["handler"]
    records = {"torchscript-fp32": [[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]}
    with pytest.raises(ArchiveMismatchError, match="torchscript-fp32 does not reproduce"):
        load(model_dir, {**handler, "check_outputs": records})


def test_batch_size_beyond_the_export_bound_serves_torchscript(tiny_compiled_model_dir, caplog) -> None:
    caplog.set_level("INFO")
    model_dir, config = tiny_compiled_model_dir
    assert load(model_dir, config["handler"], max_batch_size=8).runtime == "torchscript"
    assert "batch size 8 exceeds the 4 model.cpu-fp32.pt2 was exported for" in caplog.text


def test_a_candidate_that_failed_its_gate_is_not_served(tiny_image_model_dir, caplog) -> None:
    caplog.set_level("INFO")
    model_dir, config = tiny_image_model_dir
    handler = {**config["handler"], "failed_gates": ["torchscript-bf16"]}
    served = load(model_dir, handler, PrecisionChoice("bf16", "test"))
    assert served.precision == "fp32"
    assert "torchscript-bf16 failed the build gates" in caplog.text


def test_a_candidate_the_build_did_not_gate_is_not_served(tiny_image_model_dir, caplog) -> None:
    caplog.set_level("INFO")
    model_dir, config = tiny_image_model_dir
    handler = config["handler"]
    records = {"torchscript-fp32": handler["check_outputs"]["torchscript-fp32"]}
    served = load(model_dir, {**handler, "check_outputs": records}, PrecisionChoice("bf16", "test"))
    assert served.precision == "fp32"
    assert "torchscript-bf16 was not gated by the build" in caplog.text


@pytest.mark.parametrize("timed", ["aoti", "torchscript"])
def test_auto_at_fp32_follows_the_build_timing(tiny_compiled_model_dir, timed: str) -> None:
    model_dir, config = tiny_compiled_model_dir
    handler = {**config["handler"], "runtime": "auto", "auto_runtime": {"cpu-fp32": timed}}
    assert load(model_dir, handler).runtime == timed


def test_the_build_records_a_timing_for_each_fp32_package(tiny_gated_build) -> None:
    _, fields = tiny_gated_build
    assert fields["auto_runtime"]["cpu-fp32"] in ("aoti", "torchscript")
    assert set(fields["check_outputs"]) == {
        "torchscript-fp32",
        "torchscript-bf16",
        "torchscript-fp16",
        "aoti-cpu-fp32",
        "aoti-cpu-bf16",
        "aoti-cpu-fp16",
    }


def test_the_plan_is_the_same_for_every_worker(tiny_compiled_model_dir) -> None:
    model_dir, config = tiny_compiled_model_dir
    handler = from_mapping(ImageModelConfig, {**config["handler"], "runtime": "auto"})
    plans = [plan_candidates(handler, model_dir, "cpu", "bf16", 4) for _ in range(3)]
    assert plans[0] == plans[1] == plans[2]
    candidates, _ = plans[0]
    assert [c.name for c in candidates] == ["aoti-cpu-bf16", "torchscript-bf16", "torchscript-fp32"]


def test_packages_load_with_an_inductor_cache_that_outlives_tmpdir(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "per-instance-tmp"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert persistent_inductor_cache() == str(tmp_path / "cache" / "torchinductor")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/srv/inductor")
    assert persistent_inductor_cache() == "/srv/inductor"


HOST = {"AOTI_PLATFORM": "linux", "AOTI_MACHINE": "x86_64", "AOTI_COMPUTE_CAPABILITY": ""}


@pytest.mark.parametrize(
    ("here", "problem"),
    [
        (HOST, None),
        ({**HOST, "AOTI_MACHINE": "aarch64"}, "MACHINE 'x86_64' here 'aarch64'"),
        ({**HOST, "AOTI_COMPUTE_CAPABILITY": "80"}, None),  # a CPU package records no capability
    ],
)
def test_a_package_built_for_another_machine_is_refused_before_it_runs(
    here: dict, problem: str | None
) -> None:
    found = package_mismatch(HOST, here)
    assert (found is None) if problem is None else (problem in (found or ""))
    gpu_package = {**HOST, "AOTI_COMPUTE_CAPABILITY": "90"}
    assert "COMPUTE_CAPABILITY '90' here '80'" in (
        package_mismatch(gpu_package, {**HOST, "AOTI_COMPUTE_CAPABILITY": "80"}) or ""
    )


@pytest.mark.parametrize(
    ("flags", "served"),
    [
        (None, "aoti"),  # this CPU: the build host
        ({"avx2", "fma"}, "torchscript"),  # an AVX2-only CPU: an AVX-512/AMX package would die of SIGILL
    ],
)
def test_a_package_runs_only_on_a_cpu_with_the_build_cpus_features(
    tiny_compiled_model_dir, flags: set[str] | None, served: str
) -> None:
    model_dir, config = tiny_compiled_model_dir
    handler = from_mapping(
        ImageModelConfig, {**config["handler"], "compiled_cpu_flags": ["avx2", "fma", "amx_tile"]}
    )
    here = flags if flags is not None else set(handler.compiled_cpu_flags)
    (first, *_), skipped = plan_candidates(handler, model_dir, "cpu", "fp32", 4, here)
    assert first.runtime == served
    if served == "torchscript":
        assert "model.cpu-fp32.pt2 was compiled on a CPU with amx_tile, which this CPU lacks" in skipped


def test_the_build_hosts_own_package_matches_this_machine(tiny_gated_build) -> None:
    build, fields = tiny_gated_build
    served = load_compiled(build / "model.cpu-fp32.pt2", CPU, "fp32")
    assert served.runtime == "aoti"
    assert "avx2" in fields["compiled_cpu_flags"]  # every x86 CPU this suite runs on has it


def test_torchscript_recorded_on_the_cpu_is_not_checked_on_a_gpu(tiny_image_model_dir) -> None:
    """Forced device type: a CUDA worker's TorchScript rounds otherwise (TF32 convolutions)."""
    _, config = tiny_image_model_dir
    handler = from_mapping(ImageModelConfig, config["handler"])
    fp32 = Candidate("torchscript-fp32", "torchscript", "fp32", "model.pt")
    assert unchecked_reason(handler, fp32, "cpu") is None
    assert (
        unchecked_reason(handler, fp32, "cuda")
        == "torchscript-fp32 was recorded on the CPU: not checked on cuda"
    )
    package = Candidate("aoti-cuda-bf16", "aoti", "bf16", "model.cuda-bf16.pt2")
    assert (
        unchecked_reason(handler, package, "cuda") == "no recorded check outputs in this archive: not checked"
    )
