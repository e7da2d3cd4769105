"""The model a worker serves, decided from the build's record and nothing random.

The archive always carries the fp32 TorchScript model (``model.pt``) and may carry
AOTInductor packages compiled at build time for one device and precision
(``model.<device>-<precision>.pt2``). The build's gates on held-out data are the one
accuracy authority: they decide which candidates may be served, record each one's outputs
on fixed check inputs and, per package, which runtime ``auto`` serves (timed once, at
build). A worker only checks that what it loaded reproduces its *own* recorded outputs,
which proves it loaded and computes what was gated. So every worker of a machine makes
the same decision, and says it in one log line.
"""

from __future__ import annotations

import logging
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from batchkit.config import ModelConfig
from batchkit.precision import (
    DTYPES,
    INT8_MIN_SPEEDUP,
    NATIVE_BF16_FLAGS,
    PrecisionChoice,
    choose_precision,
    cpu_flags,
    int8_fallback,
)
from batchkit.tolerance import probabilities_disagree, tolerance
from batchkit.worker import load_torchscript

logger = logging.getLogger(__name__)

INDUCTOR_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"


def compiled_file_name(device_type: str, precision: str) -> str:
    """The one name of a compiled package in an archive."""
    return f"model.{device_type}-{precision}.pt2"


def int8_ready(compiled_models: Sequence[str], int8_speedup: float) -> bool:
    """Whether ``auto`` may take int8: the archive's int8 package passed its gates and beat
    the other candidates by ``INT8_MIN_SPEEDUP`` on the build machine."""
    return compiled_file_name("cpu", "int8") in compiled_models and int8_speedup > INT8_MIN_SPEEDUP


def worker_precision(config: ModelConfig, device: torch.device) -> PrecisionChoice:
    """The precision a worker of this archive computes in on ``device``: the one rule the
    handler, ``make doctor`` and the tests share (int8 only where the build gated it and
    timed it faster)."""
    ready = int8_ready(config.compiled_models, config.int8_speedup)
    return choose_precision(config.precision, device, int8_ready=ready)


def candidate_name(runtime: str, device_type: str, precision: str) -> str:
    """How the build names a way of serving: ``aoti-cpu-bf16``, ``torchscript-fp32``."""
    return f"aoti-{device_type}-{precision}" if runtime == "aoti" else f"torchscript-{precision}"


@dataclass
class ServedModel:
    """A loaded model and what it is: call it with fp32 / integer tensors, get fp32 logits."""

    forward: Callable[..., torch.Tensor]
    runtime: str
    precision: str
    source: str
    load_seconds: float
    # Largest batch one call runs (0: any). A batch of multi-input requests can hold more
    # inputs than batchSize; it runs in slices no larger than the sizes the package was
    # exported for and the worker warmed up.
    max_batch: int = 0
    # Why the worker serves this (precision and runtime reasons, candidates passed over).
    reasons: list[str] = field(default_factory=list)

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor:
        size = self.max_batch
        if size and inputs[0].shape[0] > size:
            slices = range(0, inputs[0].shape[0], size)
            return torch.cat([self.run_once(*(x[i : i + size] for x in inputs)) for i in slices])
        return self.run_once(*inputs)

    def run_once(self, *inputs: torch.Tensor) -> torch.Tensor:
        dtype = DTYPES[self.precision]
        if self.runtime == "aoti":
            # A package is compiled for contiguous inputs and does not check strides: a
            # channels-last or permuted view gives wrong answers silently.
            cast = [(x.to(dtype) if x.is_floating_point() else x).contiguous() for x in inputs]
            return self.forward(*cast).float()
        if self.precision == "fp32":
            return self.forward(*inputs).float()
        device_type = inputs[0].device.type
        with torch.autocast(device_type, dtype=dtype):
            return self.forward(*inputs).float()

    def describe(self) -> str:
        return f"{self.runtime} {self.precision} from {self.source} (cold load {self.load_seconds:.2f}s)"

    def decision(self) -> dict[str, Any]:
        """What this worker serves and why, for the management API's describe call."""
        return {
            "runtime": self.runtime,
            "precision": self.precision,
            "file": self.source,
            "load_seconds": round(self.load_seconds, 3),
            "why": self.reasons,
        }


@dataclass(frozen=True)
class Candidate:
    """One way this worker may serve: tried in order, the first that reproduces wins."""

    name: str
    runtime: str
    precision: str
    file: str


def persistent_inductor_cache() -> str:
    """Inductor's cache folder, kept where it outlives a process's TMPDIR.

    Loading a package first probes the CPU's vector ISA by compiling small programs with
    the C++ compiler (seconds) and caches the result under the Inductor cache, which
    defaults to ``$TMPDIR/torchinductor_<user>``. A server started with its own TMPDIR
    would pay the probe on every start, in every worker; a user cache folder pays it once
    per machine. An explicit ``TORCHINDUCTOR_CACHE_DIR`` (the image sets one) wins."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return os.environ.setdefault(INDUCTOR_CACHE_ENV, str(base / "torchinductor"))


class PackageMismatchError(RuntimeError):
    """The package was compiled for other hardware: running it could crash the worker."""


# What a package records of the machine it was compiled on, which this one must match.
MATCHED_DEVICE_KEYS = ("AOTI_PLATFORM", "AOTI_MACHINE", "AOTI_COMPUTE_CAPABILITY")


def device_signature(device: torch.device) -> dict[str, str]:
    """This machine as a package's metadata describes its build machine (no compiler
    needed: Inductor's own ISA probe compiles test programs)."""
    capability = ""
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        capability = str(major * 10 + minor)
    return {
        "AOTI_PLATFORM": sys.platform,
        "AOTI_MACHINE": platform.machine(),
        "AOTI_COMPUTE_CAPABILITY": capability,
    }


def package_mismatch(built_on: dict[str, str], here: dict[str, str]) -> str | None:
    """Why a package compiled on ``built_on`` must not run ``here`` (None: it may).

    PyTorch only warns on a mismatch; the code then crashes the worker or fails on the
    first call, so a worker checks before it runs the package."""
    differ = [key for key in MATCHED_DEVICE_KEYS if built_on.get(key) and built_on[key] != here.get(key)]
    if not differ:
        return None
    shown = "; ".join(
        f"{key.removeprefix('AOTI_')} {built_on[key]!r} here {here.get(key)!r}" for key in differ
    )
    return f"compiled for other hardware ({shown})"


def missing_cpu_flags(config: ModelConfig, flags: set[str] | None = None) -> list[str]:
    """The build CPU's compiled-code features this CPU lacks (empty: its packages may run)."""
    flags = cpu_flags() if flags is None else flags
    return [flag for flag in config.compiled_cpu_flags if flag not in flags]


def load_compiled(path: Path, device: torch.device, precision: str) -> ServedModel:
    """Load an AOTInductor package (raises when it cannot load here or was built for
    other hardware)."""
    persistent_inductor_cache()
    started = time.perf_counter()
    built_on = torch._C._aoti.AOTIModelPackageLoader.load_metadata_from_package(str(path), "model")
    problem = package_mismatch(built_on, device_signature(device))
    if problem is not None:
        raise PackageMismatchError(problem)
    device_index = device.index if device.type == "cuda" and device.index is not None else -1
    package = torch._inductor.aoti_load_package(str(path), device_index=device_index)
    return ServedModel(package, "aoti", precision, path.name, time.perf_counter() - started)


def compiled_skip_reason(
    config: ModelConfig, model_dir: Path, target: str, max_batch_size: int, missing_flags: Sequence[str]
) -> str | None:
    """Why this worker does not try the package for ``target`` ("cpu-bf16"), or None;
    ``missing_flags`` are the build CPU's features this CPU lacks."""
    name = compiled_file_name(*target.split("-"))
    if config.runtime == "torchscript":
        return "runtime set to torchscript"
    if name not in config.compiled_models:
        return f"the archive has no {name} that passed the build gates"
    if not (model_dir / name).is_file():
        return f"{name} is listed but missing from the archive"
    if max_batch_size > config.compiled_max_batch_size:
        return f"batch size {max_batch_size} exceeds the {config.compiled_max_batch_size} {name} was exported for"
    if missing_flags:
        return f"{name} was compiled on a CPU with {', '.join(missing_flags)}, which this CPU lacks"
    if config.runtime == "auto" and config.auto_runtime.get(target, "aoti") != "aoti":
        return f"runtime auto: the build timed TorchScript faster than {name} (build_info.json)"
    return None


def plan_candidates(
    config: ModelConfig,
    model_dir: Path,
    device_type: str,
    precision: str,
    max_batch_size: int,
    flags: set[str] | None = None,
) -> tuple[list[Candidate], list[str]]:
    """The candidates to try, best first (fp32 TorchScript always last), and why the others
    are not tried. Pure: the same archive, CPU flags and batch size give the same plan."""
    candidates, skipped = [], []
    missing = missing_cpu_flags(config, flags) if device_type == "cpu" else []
    problem = compiled_skip_reason(config, model_dir, f"{device_type}-{precision}", max_batch_size, missing)
    if problem is None:
        name = candidate_name("aoti", device_type, precision)
        candidates.append(Candidate(name, "aoti", precision, compiled_file_name(device_type, precision)))
    elif config.compiled_models or config.runtime == "aoti":
        skipped.append(problem)
    if precision == "int8":
        # int8 has no TorchScript form: the next precision down, bf16 where native.
        precision = int8_fallback(None if flags is None else bool(flags & set(NATIVE_BF16_FLAGS)))
        skipped.append(f"int8 has no TorchScript form: TorchScript at {precision} next")
    if precision != "fp32":
        name = candidate_name("torchscript", device_type, precision)
        if name in config.failed_gates:
            skipped.append(f"{name} failed the build gates")
        elif name not in config.check_outputs:
            skipped.append(f"{name} was not gated by the build")
        else:
            candidates.append(Candidate(name, "torchscript", precision, config.model_file))
    candidates.append(Candidate("torchscript-fp32", "torchscript", "fp32", config.model_file))
    return candidates, skipped


def unchecked_reason(config: ModelConfig, candidate: Candidate, device_type: str) -> str | None:
    """Why this worker serves ``candidate`` without comparing it to a record, or None.

    TorchScript candidates are recorded on the CPU: on a GPU other kernels (TF32
    convolutions among them) round differently, so there they are served unchecked."""
    if candidate.runtime == "torchscript" and device_type != "cpu":
        return f"{candidate.name} was recorded on the CPU: not checked on {device_type}"
    if candidate.name not in config.check_outputs:
        return "no recorded check outputs in this archive: not checked"
    return None


def reproduction_problem(
    served: ServedModel, config: ModelConfig, candidate: Candidate, check_inputs: Sequence[torch.Tensor]
) -> str | None:
    """Why ``served`` does not reproduce the outputs the build recorded for ``candidate``."""
    device_type = check_inputs[0].device.type
    if unchecked_reason(config, candidate, device_type) is not None:
        return None if candidate.runtime == "torchscript" else "no recorded check outputs"
    recorded = config.check_outputs[candidate.name]
    with torch.inference_mode():
        probabilities = torch.softmax(served(*check_inputs), dim=-1).cpu()
    problem = probabilities_disagree(torch.tensor(recorded), probabilities, candidate.precision, top1=False)
    return None if problem is None else f"does not reproduce its build record: {problem}"


def load_candidate(
    candidate: Candidate,
    config: ModelConfig,
    model_dir: Path,
    device: torch.device,
    check_inputs: Sequence[torch.Tensor],
    optimize: bool,
) -> ServedModel:
    """Load one candidate (raises when it cannot load here)."""
    if candidate.runtime == "aoti":
        return load_compiled(model_dir / candidate.file, device, candidate.precision)
    started = time.perf_counter()
    module = load_torchscript(
        model_dir / candidate.file,
        device,
        optimize=optimize and candidate.precision == "fp32",
        check_input=check_inputs[0] if len(check_inputs) == 1 else None,
        atol=tolerance("fp32"),
    )
    return ServedModel(
        module, "torchscript", candidate.precision, candidate.file, time.perf_counter() - started
    )


class ArchiveMismatchError(RuntimeError):
    """Even fp32 TorchScript does not compute what the build recorded: the archive or the
    machine is broken, and the worker must not become READY."""


def load_served_model(
    config: ModelConfig,
    model_dir: Path,
    device: torch.device,
    choice: PrecisionChoice,
    max_batch_size: int,
    check_inputs: Sequence[torch.Tensor],
    optimize: bool = False,
) -> ServedModel:
    """The first planned candidate that loads here and reproduces its build record.

    ``check_inputs`` must be the archive's fixed check inputs (``batchkit.images.check_images``,
    ``batchkit.text.check_tokens``): the build recorded its outputs on those."""
    candidates, passed_over = plan_candidates(
        config, model_dir, device.type, choice.precision, max_batch_size
    )
    inputs = [x.to(device) for x in check_inputs]
    for candidate in candidates:
        try:
            served = load_candidate(candidate, config, model_dir, device, inputs, optimize)
            served.max_batch = max_batch_size
            problem = reproduction_problem(served, config, candidate, inputs)
        except Exception as exc:  # another ISA, no compiler, no CUDA: the next candidate serves
            problem = f"did not load: {type(exc).__name__}: {exc}"
        if problem is None:
            served.reasons = [f"precision {choice.precision}: {choice.reason}", *passed_over]
            unchecked = unchecked_reason(config, candidate, device.type)
            if unchecked is not None:
                served.reasons.append(unchecked)
            logger.info("serving %s; why: %s", served.describe(), "; ".join(served.reasons))
            return served
        logger.warning("not serving %s: %s", candidate.name, problem)
        passed_over.append(f"{candidate.name} {problem}")
    raise ArchiveMismatchError(f"no candidate reproduces the build's record: {'; '.join(passed_over)}")
