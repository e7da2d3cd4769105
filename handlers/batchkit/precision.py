"""Which number format a worker computes in: the hardware facts and the flag rule.

bf16 pays off only where the hardware computes it natively (AMX or AVX-512 BF16 on CPUs,
tensor cores on GPUs); elsewhere PyTorch emulates it and it is slower than fp32. Even
native bf16 can lose to fp32 (AVX-512 BF16 without AMX), so ``batchkit.planner`` decides by
the build's timings where it has them for this CPU model and by :func:`flag_precision`
only where it does not. An explicit setting (the archive's ``precision`` or, in a worker
only, the ``TSBATCH_PRECISION`` environment variable, which wins) overrides both.

int8 is a quantized ``.pt2`` package, never TorchScript, and needs int8 dot products (VNNI
or AMX-int8: without them oneDNN's int8 can saturate and is slow).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import torch

logger = logging.getLogger(__name__)

# The dtype a model's inputs are cast to; an int8 package takes fp32 and quantizes inside.
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "int8": torch.float32}
PRECISION_ENV = "TSBATCH_PRECISION"
REQUIRE_CUDA_ENV = "TSBATCH_REQUIRE_CUDA"
NATIVE_BF16_FLAGS = ("amx_bf16", "avx512_bf16")
# The CPU features compiled code may use (Inductor picks its -m flags from them): a package
# built where they are present must only run where they are all present too.
COMPILED_CODE_FLAGS = (
    "avx2", "fma", "avx512f", "avx512dq", "avx512vl", "avx512bw", "avx512_bf16", "avx512_fp16",
    "avx512_vnni", "amx_tile", "amx_bf16", "amx_int8",
)  # fmt: skip
NATIVE_INT8_FLAGS = ("amx_int8", "avx512_vnni", "avx_vnni")


class CudaRequiredError(RuntimeError):
    """The worker was told to run on a GPU and none is usable: it must not become READY."""


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The CPU feature flags the kernel reports (empty where there is no /proc/cpuinfo)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return set(line.split(":", 1)[1].split())
    return set()


def compiled_code_flags(flags: set[str] | None = None) -> list[str]:
    """The features of this CPU that compiled code may use, recorded with each package."""
    flags = cpu_flags() if flags is None else flags
    return [flag for flag in COMPILED_CODE_FLAGS if flag in flags]


def cpu_model_name(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name as the kernel reports it ("unknown" where it does not)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return "unknown"
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def cpu_identity(flags: set[str] | None = None, cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU as build timings name it: its model name and the features compiled code may
    use. Virtual machines often report one generic model name ("Intel(R) Xeon(R) Processor")
    for CPUs with and without AMX, whose timings differ; the features tell them apart."""
    features = compiled_code_flags(cpu_flags(cpuinfo) if flags is None else flags)
    return f"{cpu_model_name(cpuinfo)} [{' '.join(features)}]"


def native_cpu_bf16(flags: set[str] | None = None) -> bool:
    """True when the CPU computes bf16 in hardware (AMX or AVX-512 BF16); given no
    ``flags``, this CPU's, with PyTorch's own probe where the kernel lists none."""
    if flags is not None:
        return any(flag in flags for flag in NATIVE_BF16_FLAGS)
    return native_cpu_bf16(cpu_flags()) or "AMX" in torch.backends.cpu.get_cpu_capability()


def native_cpu_int8(flags: set[str] | None = None) -> bool:
    """True when the CPU has int8 dot-product instructions (AMX-int8, AVX-512 or AVX VNNI)."""
    flags = cpu_flags() if flags is None else flags
    return any(flag in flags for flag in NATIVE_INT8_FLAGS)


def cuda_problem(device_index: int = 0) -> str | None:
    """Why CUDA cannot be used here, or None when a tiny op on the GPU works."""
    if not torch.cuda.is_available():
        return "torch.cuda.is_available() is False (no GPU visible, or no driver)"
    try:
        value = (torch.ones(2, device=f"cuda:{device_index}") * 2).sum().item()
    except Exception as exc:  # driver too old, device busy or broken: all mean no GPU
        return f"a test op on cuda:{device_index} failed: {type(exc).__name__}: {exc}"
    if value != 4.0:
        return f"a test op on cuda:{device_index} returned {value} instead of 4.0"
    return None


def require_cuda(device: torch.device) -> None:
    """Fail the worker's start when ``TSBATCH_REQUIRE_CUDA=1`` and it would run on the CPU."""
    if os.environ.get(REQUIRE_CUDA_ENV) != "1":
        return
    if device.type != "cuda":
        reason = cuda_problem() or "TorchServe assigned this worker no GPU (number_of_gpu is 0)"
    else:
        reason = cuda_problem(device.index or 0)
    if reason is not None:
        message = f"{REQUIRE_CUDA_ENV}=1 but no usable CUDA: {reason}; refusing to serve on the CPU"
        logger.error(message)
        raise CudaRequiredError(message)


def flag_precision(
    device_type: str, flags: set[str] | frozenset[str], cuda_bf16: bool = False, int8_ready: bool = False
) -> tuple[str, str]:
    """The precision the hardware's flags suggest, and why (no environment, no timings).

    ``int8_ready``: the archive's int8 package passed its gates and the build timed it
    faster than the other candidates."""
    if device_type == "cuda":
        if cuda_bf16:
            return "bf16", "the GPU computes bf16 natively"
        return "fp16", "the GPU has no bf16: fp16 on its tensor cores"
    if native_cpu_int8(set(flags)) and int8_ready:
        return (
            "int8",
            "the CPU has VNNI/AMX-int8 and the int8 package passed its gates and beat the others at build",
        )
    if native_cpu_bf16(set(flags)):
        return "bf16", "the CPU has native bf16 (AMX / AVX-512 BF16)"
    return "fp32", "no native bf16 on this CPU (bf16 would be emulated, slower)"
