"""Choosing the precision from the hardware, explicit overrides, and refusing to start
without the GPU a worker was told to require."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from batchkit.precision import (
    CudaRequiredError,
    choose_precision,
    cpu_flags,
    cuda_problem,
    native_cpu_bf16,
    require_cuda,
)

CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def no_environment_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TSBATCH_PRECISION", raising=False)
    monkeypatch.delenv("TSBATCH_REQUIRE_CUDA", raising=False)


def test_flags_are_read_from_cpuinfo(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_bf16 amx_tile\n")
    assert {"avx2", "avx512_bf16"} <= cpu_flags(cpuinfo)
    assert cpu_flags(tmp_path / "missing") == set()
    assert native_cpu_bf16({"avx512_bf16"}) and native_cpu_bf16({"amx_bf16"})


def test_auto_is_bf16_only_with_native_bf16(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO")
    assert choose_precision("auto", CPU, native_bf16=True).precision == "bf16"
    without = choose_precision("auto", CPU, native_bf16=False)
    assert without.precision == "fp32" and "no native bf16" in without.reason
    assert "precision fp32: auto: no native bf16" in caplog.text


def test_a_precision_the_cpu_lacks_is_honoured_when_explicit_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    choice = choose_precision("bf16", CPU, native_bf16=False)
    assert choice.precision == "bf16" and choice.dtype == torch.bfloat16
    assert "emulated" in choice.reason and "runs emulated" in caplog.text


def test_environment_overrides_the_archive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TSBATCH_PRECISION", "fp32")
    assert choose_precision("bf16", CPU, native_bf16=True).precision == "fp32"
    monkeypatch.setenv("TSBATCH_PRECISION", "int3")
    with pytest.raises(ValueError, match="precision must be auto or one of"):
        choose_precision("auto", CPU)


def test_cuda_without_bf16_serves_fp16(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    cuda = torch.device("cuda:0")
    assert choose_precision("auto", cuda).precision == "fp16"
    assert choose_precision("bf16", cuda).precision == "fp16"  # the GPU lacks it: fall back


def test_require_cuda_is_off_unless_set() -> None:
    require_cuda(CPU)  # no exception: CPU serving is fine when not required


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a usable GPU")
def test_require_cuda_refuses_to_start_without_a_gpu(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TSBATCH_REQUIRE_CUDA", "1")
    with pytest.raises(CudaRequiredError, match="TSBATCH_REQUIRE_CUDA=1 but no usable CUDA"):
        require_cuda(CPU)
    assert "refusing to serve on the CPU" in caplog.text


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a usable GPU")
def test_a_failing_cuda_op_counts_as_no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    # CUDA that claims to be there but cannot run an op (as with a too-old driver).
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    problem = cuda_problem()
    assert problem is not None and problem.startswith("a test op on cuda:0 failed")
    monkeypatch.setenv("TSBATCH_REQUIRE_CUDA", "1")
    with pytest.raises(CudaRequiredError, match="a test op on cuda:0 failed"):
        require_cuda(torch.device("cuda:0"))
