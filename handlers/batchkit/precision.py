"""Which number format a worker computes in, chosen once at load from what the machine has.

bf16 pays off only where the hardware computes it natively (AMX or AVX-512 BF16 on CPUs,
tensor cores on GPUs); elsewhere PyTorch emulates it and it is slower than fp32. So
``auto`` asks the hardware, an explicit setting (the archive's ``precision`` or the
``TSBATCH_PRECISION`` environment variable, which wins) overrides it, and the choice is
logged with its reason.

int8 is a quantized ``.pt2`` package, never TorchScript. ``auto`` picks it only on a CPU
with int8 dot products (VNNI or AMX-int8: without them oneDNN's int8 can saturate and is
slow) and only when the archive says its package passed the build's gates and measured
faster than the best bf16/fp32 candidate on the build machine (``int8_ready``).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import torch

logger = logging.getLogger(__name__)

PRECISIONS = ("fp32", "bf16", "fp16", "int8")
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
# A smaller build-time lead is within run-to-run noise, and quantization is not free.
INT8_MIN_SPEEDUP = 1.1


class CudaRequiredError(RuntimeError):
    """The worker was told to run on a GPU and none is usable: it must not become READY."""


@dataclass(frozen=True)
class PrecisionChoice:
    precision: str
    reason: str

    @property
    def dtype(self) -> torch.dtype:
        return DTYPES[self.precision]


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


def native_cpu_bf16(flags: set[str] | None = None) -> bool:
    """True when the CPU computes bf16 in hardware (AMX or AVX-512 BF16)."""
    flags = cpu_flags() if flags is None else flags
    if any(flag in flags for flag in NATIVE_BF16_FLAGS):
        return True
    return "AMX" in torch.backends.cpu.get_cpu_capability()


def native_cpu_int8(flags: set[str] | None = None) -> bool:
    """True when the CPU has int8 dot-product instructions (AMX-int8, AVX-512 or AVX VNNI)."""
    flags = cpu_flags() if flags is None else flags
    return any(flag in flags for flag in NATIVE_INT8_FLAGS)


def int8_fallback(native_bf16: bool | None = None) -> str:
    """What a worker at int8 computes in when it has no usable int8 package: TorchScript has
    no int8 form, so the next precision down, bf16 where native, else fp32."""
    return "bf16" if (native_cpu_bf16() if native_bf16 is None else native_bf16) else "fp32"


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


def choose_precision(
    configured: str,
    device: torch.device,
    native_bf16: bool | None = None,
    int8_ready: bool = False,
    native_int8: bool | None = None,
) -> PrecisionChoice:
    """The precision this worker computes in, and why (the environment beats the archive).

    ``int8_ready``: the archive's int8 package passed its gates and beat the other
    candidates on the build machine."""
    requested = os.environ.get(PRECISION_ENV) or configured
    if requested not in (*PRECISIONS, "auto"):
        raise ValueError(f"precision must be auto or one of {PRECISIONS}, got {requested!r}")
    if device.type == "cuda":
        if requested == "int8":
            logger.warning("int8 asked for, but int8 packages are CPU-only: choosing as auto on %s", device)
            requested = "auto"
        choice = _cuda_choice(requested, device)
    else:
        native = native_cpu_bf16() if native_bf16 is None else native_bf16
        vnni = native_cpu_int8() if native_int8 is None else native_int8
        choice = _int8_choice(requested, vnni, int8_ready) or _cpu_choice(requested, native)
    logger.info("precision %s: %s", choice.precision, choice.reason)
    return choice


def _cuda_choice(requested: str, device: torch.device) -> PrecisionChoice:
    bf16 = torch.cuda.is_bf16_supported()
    if requested == "auto":
        if bf16:
            return PrecisionChoice("bf16", f"auto: {device} computes bf16 natively")
        return PrecisionChoice("fp16", f"auto: {device} has no bf16, fp16 on its tensor cores")
    if requested == "bf16" and not bf16:
        logger.warning("bf16 asked for, but %s has no bf16: serving fp16", device)
        return PrecisionChoice("fp16", f"bf16 set, unsupported on {device}")
    return PrecisionChoice(requested, "set explicitly")


def _int8_choice(requested: str, native_int8: bool, int8_ready: bool) -> PrecisionChoice | None:
    """int8 when set explicitly (warned without VNNI) or when ``auto`` may take it; None:
    choose as without int8."""
    if requested == "int8":
        if native_int8:
            return PrecisionChoice("int8", "set explicitly")
        logger.warning(
            "int8 set explicitly on a CPU without VNNI/AMX-int8: oneDNN int8 may saturate and run slowly"
        )
        return PrecisionChoice("int8", "set explicitly; this CPU has no VNNI/AMX-int8")
    if requested == "auto" and native_int8 and int8_ready:
        return PrecisionChoice(
            "int8",
            "auto: the CPU has VNNI/AMX-int8 and the int8 package passed its gates and beat bf16/fp32 at build",
        )
    return None


def _cpu_choice(requested: str, native_bf16: bool) -> PrecisionChoice:
    if requested == "auto":
        if native_bf16:
            return PrecisionChoice("bf16", "auto: the CPU has native bf16 (AMX / AVX-512 BF16)")
        return PrecisionChoice("fp32", "auto: no native bf16 on this CPU (bf16 would be emulated, slower)")
    if requested != "fp32" and not (requested == "bf16" and native_bf16):
        logger.warning(
            "%s set explicitly on a CPU without native support: it runs emulated, slowly", requested
        )
        return PrecisionChoice(requested, "set explicitly; emulated on this CPU")
    return PrecisionChoice(requested, "set explicitly")
