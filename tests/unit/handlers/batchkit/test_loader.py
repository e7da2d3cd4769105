"""What a worker serves: decided from the build's record, for every CPU precision x runtime."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import torch

from batchkit.candidates import BASELINE, ServingCandidate
from batchkit.config import from_mapping
from batchkit.loader import (
    ArchiveMismatchError,
    host_here,
    load_compiled,
    load_served_model,
    package_mismatch,
    unchecked_reason,
)
from batchkit.planner import NothingToServeError, Reason, plan
from batchkit.precision import cpu_identity
from batchkit.tolerance import probabilities_disagree
from image_serving.config import ImageModelConfig
from image_serving.images import check_images
from tests.conftest import TINY_CROP

CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def no_environment_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TSBATCH_PRECISION", raising=False)


def load(model_dir: Path, handler: dict, precision: str = "fp32", max_batch_size: int = 4):
    config = from_mapping(ImageModelConfig, {**handler, "precision": precision})
    check = (check_images(config.crop_size),)
    return load_served_model(config, model_dir, CPU, max_batch_size, check, optimize=config.optimize)


def codes(served) -> dict[str, str]:
    """The worker's reasons, code by the candidate each is about."""
    return {reason["candidate"]: reason["code"] for reason in served.decision()["why"]}


def images(count: int) -> torch.Tensor:
    return torch.randn(count, 3, TINY_CROP, TINY_CROP, generator=torch.Generator().manual_seed(count))


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("runtime", ["aoti", "torchscript"])
def test_every_cpu_precision_and_runtime_is_served_and_answers_like_fp32(
    tiny_compiled_model_dir, runtime: str, precision: str
) -> None:
    """Forced, whatever this CPU has: bf16 and fp16 run emulated where it lacks them."""
    model_dir, config = tiny_compiled_model_dir
    served = load(model_dir, {**config["handler"], "runtime": runtime}, precision)
    candidate = ServingCandidate(runtime, "cpu", precision)
    assert (served.runtime, served.precision, served.source) == (runtime, precision, candidate.file_name)
    assert served.decision()["why"][0]["code"] == "precision-set"
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


def test_no_package_serves_torchscript_and_says_why_in_the_describe_call(tiny_image_model_dir) -> None:
    model_dir, config = tiny_image_model_dir
    served = load(model_dir, {**config["handler"], "runtime": "aoti"})
    assert served.runtime == "torchscript" and served.source == "model.pt"
    decision = served.decision()
    assert decision["why"][0] == {
        "code": "precision-set",
        "detail": "fp32 set in the archive",
        "candidate": "",
    }
    assert codes(served)["aoti-cpu-fp32"] == "no-package"
    assert decision["why"] == [asdict(reason) for reason in served.reasons]


def test_package_that_fails_to_load_falls_back_saying_why(tiny_compiled_model_dir) -> None:
    model_dir, config = tiny_compiled_model_dir
    (model_dir / "model.cpu-fp32.pt2").write_bytes(b"not a zip archive")
    served = load(model_dir, config["handler"])
    assert served.runtime == "torchscript"
    (reason,) = [r for r in served.reasons if r.code == "not-served"]
    assert reason.detail.startswith("aoti-cpu-fp32 did not load")


def test_a_package_that_does_not_reproduce_its_record_is_not_served(tiny_compiled_model_dir) -> None:
    model_dir, config = tiny_compiled_model_dir
    handler = config["handler"]
    records = dict(handler["check_outputs"])
    records["aoti-cpu-bf16"] = [list(reversed(row)) for row in records["aoti-cpu-bf16"]]
    served = load(model_dir, {**handler, "check_outputs": records}, "bf16")
    assert (served.runtime, served.precision) == ("torchscript", "bf16")
    (reason,) = [r for r in served.reasons if r.code == "not-served"]
    assert reason.detail.startswith("aoti-cpu-bf16 does not reproduce its build record: probabilities differ")


def test_fp32_torchscript_that_does_not_reproduce_fails_the_worker(tiny_image_model_dir) -> None:
    model_dir, config = tiny_image_model_dir
    handler = config["handler"]
    records = {"torchscript-fp32": [[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]}
    with pytest.raises(ArchiveMismatchError, match="torchscript-fp32 does not reproduce"):
        load(model_dir, {**handler, "check_outputs": records})


def test_batch_size_beyond_the_export_bound_serves_torchscript(tiny_compiled_model_dir) -> None:
    model_dir, config = tiny_compiled_model_dir
    served = load(model_dir, config["handler"], max_batch_size=8)
    assert served.runtime == "torchscript" and codes(served)["aoti-cpu-fp32"] == "export-bound"


def test_a_candidate_that_failed_its_gate_is_not_served(tiny_image_model_dir) -> None:
    model_dir, config = tiny_image_model_dir
    handler = {**config["handler"], "failed_gates": ["torchscript-bf16"]}
    served = load(model_dir, handler, "bf16")
    assert served.precision == "fp32" and codes(served)["torchscript-bf16"] == "failed-gates"


def test_a_candidate_the_build_did_not_gate_is_not_served(tiny_image_model_dir) -> None:
    model_dir, config = tiny_image_model_dir
    handler = config["handler"]
    records = {"torchscript-fp32": handler["check_outputs"]["torchscript-fp32"]}
    served = load(model_dir, {**handler, "check_outputs": records}, "bf16")
    assert served.precision == "fp32"
    assert "torchscript-bf16" not in codes(served)  # the archive does not name it at all


@pytest.mark.parametrize(("package_ms", "served"), [(1.0, "aoti"), (9.5, "torchscript")])
def test_auto_follows_the_build_timing_on_this_cpu(
    tiny_compiled_model_dir, package_ms: float, served: str
) -> None:
    model_dir, config = tiny_compiled_model_dir
    timings = {
        "cpu_model": cpu_identity(),
        "batch_size": 4,
        "ms": {"torchscript-fp32": 10.0, "aoti-cpu-fp32": package_ms},
    }
    handler = {**config["handler"], "runtime": "auto", "timings_ms": timings}
    model = load(model_dir, handler, "auto")
    assert model.runtime == served and model.reasons[0].code == "measured"


def test_the_build_times_and_records_every_candidate(tiny_gated_build) -> None:
    _, fields = tiny_gated_build
    timings = fields["timings_ms"]
    assert (timings["cpu_model"], timings["batch_size"]) == (cpu_identity(), 4)
    assert set(timings["ms"]) == set(fields["check_outputs"]) and min(timings["ms"].values()) > 0
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
    handler = from_mapping(ImageModelConfig, {**config["handler"], "runtime": "aoti", "precision": "bf16"})
    plans = [plan(handler, host_here(model_dir, CPU, 4)) for _ in range(3)]
    assert plans[0] == plans[1] == plans[2]
    assert [c.name for c in plans[0].candidates] == ["aoti-cpu-bf16", "torchscript-bf16", "torchscript-fp32"]


# A fresh worker's load: no compiler on PATH, an empty Inductor cache, and what it imported.
FRESH_LOAD = """
import sys, torch
from batchkit.loader import load_compiled
served = load_compiled(__import__("pathlib").Path(sys.argv[1]), torch.device("cpu"), "fp32")
torch.manual_seed(0)
print(served(torch.rand(3, 3, 16, 16)).tolist())
print(sorted(name for name in ("torch._inductor", "torch._dynamo") if name in sys.modules))
"""


def test_a_package_loads_without_inductor_a_compiler_or_its_cache(tiny_gated_build, tmp_path: Path) -> None:
    """The worker's loader skips Inductor's ISA probe (a C++ compile, 9 s with a cold cache)
    and the import of Inductor and Dynamo (1.2 s of CPU): its answers are the package's own."""
    build, _ = tiny_gated_build
    package = build / "model.cpu-fp32.pt2"
    env = {
        **os.environ,
        "PATH": str(Path(sys.executable).parent),  # no g++ / c++ / clang++
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "empty-cache"),
        "TMPDIR": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "-c", FRESH_LOAD, str(package)], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    answers, imported = result.stdout.strip().splitlines()[-2:]
    assert imported == "[]", "loading a package imported Inductor"
    torch.manual_seed(0)
    expected = torch._inductor.aoti_load_package(str(package))(torch.rand(3, 3, 16, 16))
    torch.testing.assert_close(torch.tensor(json.loads(answers)), expected, rtol=0, atol=1e-6)
    assert not (tmp_path / "empty-cache").exists(), "nothing compiled or cached"


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
    here = frozenset(flags if flags is not None else handler.compiled_cpu_flags)
    planned = plan(handler, replace(host_here(model_dir, CPU, 4), flags=here))
    assert planned.first.runtime == served
    if served == "torchscript":
        assert (
            Reason(
                "cpu-flags",
                "model.cpu-fp32.pt2 was compiled on a CPU with amx_tile, which this CPU lacks",
                "aoti-cpu-fp32",
            )
            in planned.reasons
        )


def test_the_build_hosts_own_package_matches_this_machine(tiny_gated_build) -> None:
    build, fields = tiny_gated_build
    served = load_compiled(build / "model.cpu-fp32.pt2", CPU, "fp32")
    assert served.runtime == "aoti"
    assert "avx2" in fields["compiled_cpu_flags"]  # every x86 CPU this suite runs on has it


def test_torchscript_recorded_on_the_cpu_is_not_checked_on_a_gpu(tiny_image_model_dir) -> None:
    """Forced device type: a CUDA worker's TorchScript rounds otherwise (TF32 convolutions)."""
    _, config = tiny_image_model_dir
    handler = from_mapping(ImageModelConfig, config["handler"])
    assert unchecked_reason(handler, BASELINE, "cpu") is None
    assert unchecked_reason(handler, BASELINE.on("cuda"), "cuda") == Reason(
        "unchecked", "torchscript-fp32 was recorded on the CPU: not checked on cuda"
    )
    package = ServingCandidate("aoti", "cuda", "bf16")
    assert unchecked_reason(handler, package, "cuda") == Reason(
        "unchecked", "no recorded check outputs in this archive: not checked"
    )


@pytest.fixture
def program_only_dir(tiny_compiled_model_dir):
    """The tiny archive as a program that does not trace is built: packages, no TorchScript."""
    model_dir, config = tiny_compiled_model_dir
    (model_dir / "model.pt").unlink()
    handler = config["handler"]
    records = {name: rows for name, rows in handler["check_outputs"].items() if name.startswith("aoti-")}
    timings = {
        **handler["timings_ms"],
        "ms": {n: ms for n, ms in handler["timings_ms"]["ms"].items() if n in records},
    }
    fields = {"model_file": "", "check_outputs": records, "timings_ms": timings, "runtime": "auto"}
    return model_dir, {**handler, **fields}


def test_an_archive_without_torchscript_serves_its_package_in_slices(program_only_dir) -> None:
    model_dir, handler = program_only_dir
    served = load(model_dir, handler, "auto", max_batch_size=8)  # exported for batches of 4
    assert served.runtime == "aoti" and served.max_batch == 4
    assert any(r.code == "no-torchscript" and "slices of 4" in r.detail for r in served.reasons)
    with torch.inference_mode():
        together = served(images(8))
        alone = torch.cat([served(image[None]) for image in images(8)])
    assert torch.allclose(together, alone, atol=1e-4)


def test_an_archive_without_torchscript_whose_packages_cannot_serve_fails_the_worker_saying_why(
    program_only_dir,
) -> None:
    model_dir, handler = program_only_dir
    for package in model_dir.glob("model.*.pt2"):
        package.write_bytes(b"not a zip archive")
    with pytest.raises(
        NothingToServeError, match="no TorchScript model and none of its AOTInductor"
    ) as error:
        load(model_dir, handler, "fp32")
    assert "aoti-cpu-fp32 did not load" in str(error.value) and "tsbatch archive" in str(error.value)
    with pytest.raises(NothingToServeError, match="cpu-flags"):
        load(model_dir, {**handler, "compiled_cpu_flags": ["no_such_flag"]}, "fp32")
