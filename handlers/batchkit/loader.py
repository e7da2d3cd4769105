"""The model a worker serves: the compiled ``.pt2`` when it loads and agrees, else TorchScript.

The archive always carries the fp32 TorchScript model (``model.pt``) and may carry
AOTInductor packages compiled at build time for one device and precision
(``model.<device>-<precision>.pt2``), listed in the handler config only when they passed
the build's accuracy gates. A package compiled for another instruction set, a machine
without a compiler toolchain, or a batch size above the one it was exported for does not
load or is not used here; the worker then serves TorchScript and says why.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from batchkit.config import ModelConfig
from batchkit.precision import DTYPES, INT8_MIN_SPEEDUP, PrecisionChoice, int8_fallback
from batchkit.runtime import load_torchscript

logger = logging.getLogger(__name__)

RUNTIMES = ("auto", "aoti", "torchscript")
# Largest probability difference a load-time check accepts, per precision.
CHECK_TOLERANCE = {"fp32": 1e-4, "bf16": 1e-2, "fp16": 1e-2}
# At fp32, `auto` serves the package only when it is clearly faster than TorchScript on the
# load-time timing: a smaller lead is within run-to-run noise, and TorchScript is the
# artifact users asked for.
AUTO_MARGIN = 0.1


def compiled_file_name(device_type: str, precision: str) -> str:
    """The one name of a compiled package in an archive."""
    return f"model.{device_type}-{precision}.pt2"


def int8_ready(compiled_models: Sequence[str], int8_speedup: float) -> bool:
    """Whether ``auto`` may take int8: the archive's int8 package passed its gates and beat
    the other candidates by ``INT8_MIN_SPEEDUP`` on the build machine."""
    return compiled_file_name("cpu", "int8") in compiled_models and int8_speedup > INT8_MIN_SPEEDUP


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
        return f"{self.runtime} {self.precision} from {self.source} (loaded in {self.load_seconds:.2f}s)"


def agreement_problem(reference: torch.Tensor, candidate: torch.Tensor, precision: str) -> str | None:
    """Why ``candidate`` logits disagree with the fp32 ``reference``, or None when they agree.

    int8 is checked for answers of the right shape that are all finite, not against fp32:
    its activation ranges were calibrated on real data, the seeded noise of the check lies
    outside them, and its accuracy is what the build's gates judged on held-out data."""
    if precision == "int8":
        if candidate.shape != reference.shape or not bool(torch.isfinite(candidate).all()):
            return f"int8 answers of shape {tuple(candidate.shape)} are not finite logits like fp32's"
        return None
    expected = torch.softmax(reference.float(), dim=-1)
    actual = torch.softmax(candidate.float(), dim=-1)
    difference = float((expected - actual).abs().max())
    if not difference <= CHECK_TOLERANCE[precision]:
        return f"probabilities differ by {difference:.2e} (tolerance {CHECK_TOLERANCE[precision]:g})"
    if precision != "fp32" and not torch.equal(expected.argmax(-1), actual.argmax(-1)):
        return "top-1 differs from fp32"
    return None


def load_compiled(path: Path, device: torch.device, precision: str) -> ServedModel:
    """Load an AOTInductor package (raises when it cannot load here)."""
    started = time.perf_counter()
    device_index = device.index if device.type == "cuda" and device.index is not None else -1
    package = torch._inductor.aoti_load_package(str(path), device_index=device_index)
    return ServedModel(package, "aoti", precision, path.name, time.perf_counter() - started)


def batch_ms(model: ServedModel, batch: Sequence[torch.Tensor], runs: int = 3) -> float:
    """Best time of ``runs`` calls after two warm-up calls (TorchScript profiles on those)."""
    times = []
    with torch.inference_mode():
        for run in range(runs + 2):
            started = time.perf_counter()
            model(*batch)
            if run >= 2:
                times.append(1000 * (time.perf_counter() - started))
    return min(times)


def slower_problem(
    compiled: ServedModel, torchscript: ServedModel, inputs: Sequence[torch.Tensor], batch_size: int
) -> str | None:
    """Why the package should not be served at fp32: optimized TorchScript (oneDNN) can be
    faster on some CPUs, so ``auto`` times both on a full batch; None when the package wins
    by more than ``AUTO_MARGIN``."""
    batch = [x[torch.arange(batch_size) % len(x)] for x in inputs]
    compiled_ms, torchscript_ms = batch_ms(compiled, batch), batch_ms(torchscript, batch)
    logger.info(
        "runtime auto: %s %.1f ms, TorchScript %.1f ms per batch of %d",
        compiled.source,
        compiled_ms,
        torchscript_ms,
        batch_size,
    )
    if compiled_ms <= torchscript_ms * (1 - AUTO_MARGIN):
        return None
    return f"{compiled.source} is not clearly faster here ({compiled_ms:.1f} ms vs {torchscript_ms:.1f} ms per batch)"


def compiled_problem(
    config: ModelConfig, model_dir: Path, device: torch.device, precision: str, max_batch_size: int
) -> str | None:
    """Why this worker cannot use a compiled package, or None when it should try one."""
    name = compiled_file_name(device.type, precision)
    if config.runtime == "torchscript":
        return "runtime set to torchscript"
    if name not in config.compiled_models:
        return f"the archive has no {name} that passed the build gates"
    if not (model_dir / name).is_file():
        return f"{name} is listed but missing from the archive"
    if max_batch_size > config.compiled_max_batch_size:
        return f"batch size {max_batch_size} exceeds the {config.compiled_max_batch_size} {name} was exported for"
    return None


def load_served_model(
    config: ModelConfig,
    model_dir: Path,
    device: torch.device,
    choice: PrecisionChoice,
    max_batch_size: int,
    check_inputs: Sequence[torch.Tensor],
    optimize: bool = False,
) -> ServedModel:
    """The fastest artifact that loads and agrees with fp32 TorchScript on ``check_inputs``."""
    started = time.perf_counter()
    reference = load_torchscript(
        model_dir / config.model_file,
        device,
        optimize=optimize and choice.precision == "fp32",
        check_input=check_inputs[0] if len(check_inputs) == 1 else None,
        atol=CHECK_TOLERANCE["fp32"],
    )
    torchscript = ServedModel(
        reference,
        "torchscript",
        choice.precision,
        config.model_file,
        time.perf_counter() - started,
        max_batch=max_batch_size,
    )
    inputs = [x.to(device) for x in check_inputs]
    with torch.inference_mode():
        expected = reference(*inputs)
    problem = compiled_problem(config, model_dir, device, choice.precision, max_batch_size)
    if problem is None:
        path = model_dir / compiled_file_name(device.type, choice.precision)
        try:
            compiled = load_compiled(path, device, choice.precision)
            compiled.max_batch = max_batch_size
            with torch.inference_mode():
                problem = agreement_problem(expected, compiled(*inputs), choice.precision)
        except Exception as exc:  # another ISA, no compiler, no CUDA: TorchScript still serves
            problem = f"{path.name} did not load: {type(exc).__name__}: {exc}"
        if problem is None and config.runtime == "auto" and choice.precision == "fp32":
            problem = slower_problem(compiled, torchscript, inputs, max_batch_size)
        if problem is None:
            logger.info("serving %s", compiled.describe())
            return compiled
    expected_compiled = config.runtime == "aoti" or (
        config.runtime == "auto" and bool(config.compiled_models)
    )
    log = logger.warning if expected_compiled and "is not clearly faster here" not in str(problem) else logger.info
    log("serving TorchScript: %s", problem)
    if choice.precision == "int8":
        torchscript.precision = int8_fallback()
        logger.warning(
            "no usable int8 package (%s) and int8 has no TorchScript form: serving TorchScript at %s",
            problem,
            torchscript.precision,
        )
    if torchscript.precision != "fp32":
        candidate = f"torchscript-{torchscript.precision}"
        if candidate in config.failed_gates:
            problem = f"{candidate} failed the build gates"
        else:
            try:
                with torch.inference_mode():
                    problem = agreement_problem(expected, torchscript(*inputs), torchscript.precision)
            except Exception as exc:
                problem = f"{type(exc).__name__}: {exc}"
        if problem is not None:
            logger.warning("TorchScript at %s not served (%s): serving fp32", torchscript.precision, problem)
            torchscript.precision = "fp32"
    logger.info("serving %s", torchscript.describe())
    return torchscript
