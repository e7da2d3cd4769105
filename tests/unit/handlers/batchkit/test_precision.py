"""The hardware facts and the flag rule behind the precision (the planner's fallback), and
refusing to start without the GPU a worker was told to require."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from batchkit.precision import (
    CudaRequiredError,
    cpu_flags,
    cpu_identity,
    cuda_problem,
    flag_precision,
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


@pytest.mark.parametrize(
    ("flags", "expected"),
    [({"avx2", "amx_bf16"}, "bf16"), ({"avx2", "avx512_bf16"}, "bf16"), ({"avx2", "fma"}, "fp32")],
)
def test_the_flag_rule_takes_bf16_only_where_native(flags: set[str], expected: str) -> None:
    precision, reason = flag_precision("cpu", flags)
    assert precision == expected
    assert ("no native bf16" in reason) is (expected == "fp32")


def test_the_flag_rule_on_a_gpu_is_bf16_where_supported_else_fp16() -> None:
    assert flag_precision("cuda", set(), cuda_bf16=True)[0] == "bf16"
    assert flag_precision("cuda", set(), cuda_bf16=False)[0] == "fp16"


def test_the_flag_rule_reads_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TSBATCH_PRECISION", "fp16")
    assert flag_precision("cpu", {"avx512_bf16"})[0] == "bf16"


def test_require_cuda_is_off_unless_set() -> None:
    require_cuda(CPU)  # no exception: CPU serving is fine when not required


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a usable GPU")
def test_require_cuda_refuses_to_start_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TSBATCH_REQUIRE_CUDA", "1")
    with pytest.raises(CudaRequiredError, match=r"no usable CUDA.*refusing to serve on the CPU"):
        require_cuda(CPU)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a usable GPU")
def test_a_failing_cuda_op_counts_as_no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    # CUDA that claims to be there but cannot run an op (as with a too-old driver).
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    problem = cuda_problem()
    assert problem is not None and problem.startswith("a test op on cuda:0 failed")
    monkeypatch.setenv("TSBATCH_REQUIRE_CUDA", "1")
    with pytest.raises(CudaRequiredError, match="a test op on cuda:0 failed"):
        require_cuda(torch.device("cuda:0"))


def test_one_generic_model_name_with_and_without_amx_is_two_cpus(tmp_path: Path) -> None:
    """Build timings from an AMX host must not decide on the same VM model without AMX."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("model name\t: Intel(R) Xeon(R) Processor\nflags\t\t: avx2 avx512f amx_bf16\n")
    with_amx = cpu_identity(cpuinfo=cpuinfo)
    assert with_amx == "Intel(R) Xeon(R) Processor [avx2 avx512f amx_bf16]"
    assert cpu_identity({"avx2", "avx512f"}, cpuinfo=cpuinfo) != with_amx
