"""The model a worker serves, decided from the build's record and nothing random.

The archive carries the fp32 TorchScript model (``model.pt``, the fallback of every plan;
absent only where an exported program does not trace into one that serves every batch
size) and may carry AOTInductor packages compiled at build time for one device and
precision (``model.<device>-<precision>.pt2``). The build's gates on held-out data are the one
accuracy authority: they decide which candidates may be served, record each one's outputs
on fixed check inputs and time each one on the build CPU. ``batchkit.planner`` orders the
candidates; a worker only checks that what it loaded reproduces its *own* recorded
outputs, which proves it loaded and computes what was gated. So every worker of a machine
makes the same decision, and says it in one log line and in its describe call, from the
same structured reasons.
"""

from __future__ import annotations

import logging
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.utils._pytree as pytree

from batchkit.candidates import ServingCandidate
from batchkit.config import ModelConfig
from batchkit.planner import Host, NothingToServeError, Plan, Reason, has_torchscript, nothing_to_serve, plan
from batchkit.precision import DTYPES, PRECISION_ENV, cpu_flags, cpu_identity
from batchkit.tolerance import probabilities_disagree, tolerance
from batchkit.worker import load_torchscript

logger = logging.getLogger(__name__)


def host_here(model_dir: Path, device: torch.device, max_batch_size: int) -> Host:
    """This machine and worker as the planner sees them (the one place a worker reads its
    CPU, its archive's files and ``TSBATCH_PRECISION`` for the plan)."""
    return Host(
        device_type=device.type,
        flags=frozenset(cpu_flags()),
        cpu_model=cpu_identity(),
        batch_size=max_batch_size,
        files=frozenset(path.name for path in model_dir.iterdir()) if model_dir.is_dir() else frozenset(),
        cuda_bf16=device.type == "cuda" and torch.cuda.is_bf16_supported(),
        precision_setting=os.environ.get(PRECISION_ENV, ""),
    )


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
    # Why the worker serves this: the plan's reasons, then candidates passed over at load.
    reasons: list[Reason] = field(default_factory=list)

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
            "why": [asdict(reason) for reason in self.reasons],
        }


class PackagedProgram:
    """An AOTInductor package run through PyTorch's C++ loader directly.

    ``torch._inductor.aoti_load_package`` builds the same loader, then imports Inductor
    (and Dynamo with it: about 1.2 s of CPU) and probes the CPU's vector ISA by compiling
    test programs with the C++ compiler (9 s on a 2-core machine with a cold Inductor
    cache), only to warn when the ISA differs from the build machine's. The planner
    already decides from the CPU's flags, and ``package_mismatch`` refuses other
    hardware, so a worker skips both: its package loads in milliseconds, with no compiler."""

    def __init__(self, path: Path, device_index: int) -> None:
        self.loader = torch._C._aoti.AOTIModelPackageLoader(str(path), "model", False, 1, device_index)
        self.outputs = pytree.treespec_loads(self.loader.get_call_spec()[1])

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor:
        return pytree.tree_unflatten(self.loader.boxed_run(list(inputs)), self.outputs)


class PackageMismatchError(RuntimeError):
    """The package was compiled for other hardware: running it could crash the worker."""


# What a package records of the machine it was compiled on, which this one must match.
MATCHED_DEVICE_KEYS = ("AOTI_PLATFORM", "AOTI_MACHINE", "AOTI_COMPUTE_CAPABILITY")


def device_signature(device: torch.device) -> dict[str, str]:
    """This machine as a package's metadata describes its build machine (read without
    Inductor, whose ISA probe needs a C++ compiler)."""
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


def load_compiled(path: Path, device: torch.device, precision: str) -> ServedModel:
    """Load an AOTInductor package (raises when it cannot load here or was built for
    other hardware)."""
    started = time.perf_counter()
    built_on = torch._C._aoti.AOTIModelPackageLoader.load_metadata_from_package(str(path), "model")
    problem = package_mismatch(built_on, device_signature(device))
    if problem is not None:
        raise PackageMismatchError(problem)
    device_index = device.index if device.type == "cuda" and device.index is not None else -1
    return ServedModel(
        PackagedProgram(path, device_index), "aoti", precision, path.name, time.perf_counter() - started
    )


def unchecked_reason(config: ModelConfig, candidate: ServingCandidate, device_type: str) -> Reason | None:
    """Why this worker serves ``candidate`` without comparing it to a record, or None.

    TorchScript candidates are recorded on the CPU: on a GPU other kernels (TF32
    convolutions among them) round differently, so there they are served unchecked."""
    if candidate.runtime == "torchscript" and device_type != "cpu":
        return Reason("unchecked", f"{candidate.name} was recorded on the CPU: not checked on {device_type}")
    if candidate.name not in config.check_outputs:
        return Reason("unchecked", "no recorded check outputs in this archive: not checked")
    return None


def reproduction_problem(
    served: ServedModel,
    config: ModelConfig,
    candidate: ServingCandidate,
    check_inputs: Sequence[torch.Tensor],
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
    candidate: ServingCandidate,
    config: ModelConfig,
    model_dir: Path,
    device: torch.device,
    check_inputs: Sequence[torch.Tensor],
    optimize: bool,
) -> ServedModel:
    """Load one candidate (raises when it cannot load here)."""
    if candidate.runtime == "aoti":
        return load_compiled(model_dir / candidate.file_name, device, candidate.precision)
    started = time.perf_counter()
    module = load_torchscript(
        model_dir / config.model_file,
        device,
        optimize=optimize and candidate.precision == "fp32",
        check_input=check_inputs[0] if len(check_inputs) == 1 else None,
        atol=tolerance("fp32"),
    )
    return ServedModel(
        module, "torchscript", candidate.precision, config.model_file, time.perf_counter() - started
    )


class ArchiveMismatchError(RuntimeError):
    """Even fp32 TorchScript does not compute what the build recorded: the archive or the
    machine is broken, and the worker must not become READY."""


def load_served_model(
    config: ModelConfig,
    model_dir: Path,
    device: torch.device,
    max_batch_size: int,
    check_inputs: Sequence[torch.Tensor],
    optimize: bool = False,
    host: Host | None = None,
) -> ServedModel:
    """The first planned candidate that loads here and reproduces its build record; a
    :class:`NothingToServeError` saying why when an archive without TorchScript has none.

    ``check_inputs`` must be the archive's fixed check inputs (``image_serving.images.check_images``,
    ``text_serving.text.check_tokens``): the build recorded its outputs on those. ``host``
    defaults to this machine (:func:`host_here`)."""
    planned: Plan = plan(config, host or host_here(model_dir, device, max_batch_size))
    reasons = list(planned.reasons)
    inputs = [x.to(device) for x in check_inputs]
    for candidate in planned.candidates:
        try:
            served = load_candidate(candidate, config, model_dir, device, inputs, optimize)
            # A package runs batches no larger than it was exported for (slices beyond).
            exported = config.compiled_max_batch_size if candidate.runtime == "aoti" else 0
            served.max_batch = min(max_batch_size, exported or max_batch_size)
            problem = reproduction_problem(served, config, candidate, inputs)
        except Exception as exc:  # another ISA, no compiler, no CUDA: the next candidate serves
            problem = f"did not load: {type(exc).__name__}: {exc}"
        if problem is None:
            unchecked = unchecked_reason(config, candidate, device.type)
            served.reasons = reasons + ([unchecked] if unchecked is not None else [])
            logger.info("serving %s; why: %s", served.describe(), "; ".join(map(str, served.reasons)))
            return served
        logger.warning("not serving %s: %s", candidate.name, problem)
        reasons.append(Reason("not-served", f"{candidate.name} {problem}"))
    if not has_torchscript(config):  # nothing left to try, whatever the plan held
        raise NothingToServeError(nothing_to_serve(Plan((), tuple(reasons))))
    raise ArchiveMismatchError(f"no candidate reproduces the build's record: {'; '.join(map(str, reasons))}")
