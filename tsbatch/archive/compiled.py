"""AOTInductor packages beside the TorchScript model, and the gates that decide what is served.

``torch.export`` traces the eager model with a dynamic batch dimension (and sequence length
for text) and ``torch._inductor.aoti_compile_and_package`` compiles it, with freezing, into
a ``.pt2`` for one device and precision. Compiling takes tens of seconds and the result
runs only on the kind of machine it was built on, so the build compiles only what the
build host itself would serve (``targets: host``): fp32 on a CPU without native bf16, bf16
on one with it, and the GPU's choice where CUDA works. A CUDA package is built on a GPU
host (``scripts/gpu_check.sh`` or ``tsbatch archive`` there). On a CPU with VNNI or
AMX-int8 the host also gets ``cpu-int8``, quantized by ``tsbatch.archive.int8`` instead.
The host's choice is its hardware's (``batchkit.precision.flag_precision``), never a
worker's ``TSBATCH_PRECISION`` left in the shell. Every gated CPU candidate is then timed
(``timings_ms``): ``auto`` serves the fastest on a CPU of the same model.

Where a model has no TorchScript form (an exported program whose graph does not trace into
one that serves every batch size), its eager module is the reference, the packages are
compiled from it and are all the archive serves; a build where none passes fails.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from batchkit.candidates import BASELINE, ServingCandidate
from batchkit.config import BuildTimings
from batchkit.loader import ServedModel, load_compiled
from batchkit.precision import (
    DTYPES,
    compiled_code_flags,
    cpu_flags,
    cuda_problem,
    flag_precision,
    native_cpu_int8,
)
from batchkit.worker import optimize_for_serving
from tsbatch.archive.aoti import export_and_compile
from tsbatch.archive.gates import Batch, GateResult, Scorer, batch_independence, judge, probabilities
from tsbatch.archive.int8.candidate import Int8Plan, gate_limits, quantized_ops_problem
from tsbatch.archive.int8.quantize import compile_int8
from tsbatch.archive.schema import Compile
from tsbatch.archive.timing import TIMING_THREADS, time_candidates


@dataclass(frozen=True)
class GateData:
    """What a model's build gates its candidates on: held-out batches and their scorer,
    each item of the first batch alone, the fixed check inputs whose outputs are recorded,
    the export's dynamic shapes, and whether workers serve fp32 TorchScript optimized."""

    batches: Sequence[Batch]
    score: Scorer | None
    check: Batch
    dynamic_shapes: tuple[dict[int, Any], ...]
    singles: Sequence[Batch] | None = None  # default: sliced from the first batch
    optimize: bool = False


@dataclass(frozen=True)
class CompileSettings:
    """The manifest's ``compile:`` section."""

    targets: tuple[str, ...]  # "<device>-<precision>", e.g. cpu-fp32, cuda-fp16
    max_batch_size: int
    torchscript_precisions: tuple[str, ...]
    enforce_gates: bool = True  # False (benchmarks on random weights): record, serve anyway


@dataclass
class GateOutcome:
    """What the gates let the archive serve, with every candidate's figures."""

    max_batch_size: int
    enforced: bool = True
    results: list[GateResult] = field(default_factory=list)
    compiled_models: list[str] = field(default_factory=list)
    compile_figures: dict[str, dict[str, Any]] = field(default_factory=dict)
    check_outputs: dict[str, list[list[float]]] = field(default_factory=dict)
    timings: BuildTimings = field(default_factory=BuildTimings)
    int8: dict[str, Any] = field(default_factory=dict)  # its calibration
    reference_figures: dict[str, float] = field(default_factory=dict)  # fp32 TorchScript's scores
    skipped: dict[str, str] = field(default_factory=dict)  # target -> why no package was built
    no_torchscript: str = ""  # why the archive has no TorchScript ("": it has)

    def skip(self, target: str, why: str) -> None:
        """Record that ``target`` has no package, and why (build info, report, log)."""
        self.skipped[target] = why
        serving = "its other candidates serve" if self.no_torchscript else "serving TorchScript"
        print(f"[export] {target}: no package, {serving} ({why})")

    @property
    def failed(self) -> list[str]:
        return [result.candidate for result in self.results if self.enforced and not result.passed]

    def servable_check_outputs(self) -> dict[str, list[list[float]]]:
        """The records of the candidates a worker may serve (fp32 TorchScript always)."""
        failed = set(self.failed)
        return {name: outputs for name, outputs in self.check_outputs.items() if name not in failed}

    def handler_fields(self) -> dict[str, Any]:
        return {
            **({"model_file": ""} if self.no_torchscript else {}),
            "compiled_models": self.compiled_models,
            "compiled_max_batch_size": self.max_batch_size if self.compiled_models else 0,
            "failed_gates": self.failed,
            "check_outputs": self.servable_check_outputs(),
            "compiled_cpu_flags": compiled_code_flags() if self.compiled_models else [],
            "timings_ms": dataclasses.asdict(self.timings),
        }

    def build_info(self) -> dict[str, Any]:
        gates: dict[str, dict[str, Any]] = {
            name: {"check_outputs": outputs} for name, outputs in self.check_outputs.items()
        }
        for result in self.results:
            gates.setdefault(result.candidate, {}).update(
                {**result.figures, "passed": result.passed, "failures": result.failures}
            )
        return {
            "gates": gates,
            "compiled": self.compile_figures,
            "int8": self.int8,
            "skipped_targets": self.skipped,
            "timings_ms": dataclasses.asdict(self.timings),
            **({"no_torchscript": self.no_torchscript} if self.no_torchscript else {}),
        }


class NothingToServeError(RuntimeError):
    """A model without TorchScript none of whose packages passed: an archive would not serve."""


def host_targets(flags: set[str] | None = None) -> list[str]:
    """What this build machine would serve by its hardware (``flags``: this CPU's): its
    CPU's flag-rule precision, its GPU's, and int8 where the CPU has int8 dot products.
    No environment variable is read: a worker's override must not change the build."""
    flags = cpu_flags() if flags is None else flags
    targets = [ServingCandidate("aoti", "cpu", flag_precision("cpu", flags)[0])]
    if cuda_problem() is None:
        gpu_precision = flag_precision("cuda", flags, torch.cuda.is_bf16_supported())[0]
        targets.append(ServingCandidate("aoti", "cuda", gpu_precision))
    if native_cpu_int8(flags):
        targets.append(ServingCandidate("aoti", "cpu", "int8"))
    return list(dict.fromkeys(target.target for target in targets))


def compile_settings(section: Compile) -> CompileSettings:
    """The ``compile:`` section; ``host`` (the default of both lists) means what this machine
    serves: emulated bf16 gates cost minutes on a large input, so they run only when asked."""
    precisions: Sequence[str] = section.torchscript_precisions
    if precisions == "host":
        precisions = [
            precision
            for precision in (ServingCandidate.parse(target).precision for target in host_targets())
            if precision in ("bf16", "fp16")
        ]
        if cuda_problem() is None:
            precisions.append("fp16")  # what a GPU without bf16, or a user's pin, serves
    return CompileSettings(
        targets=tuple(host_targets() if section.targets == "host" else section.targets),
        max_batch_size=section.max_batch_size,
        torchscript_precisions=tuple(dict.fromkeys(precisions)),
        enforce_gates=section.enforce_gates,
    )


def compile_package(
    model: torch.nn.Module,
    example: Batch,
    dynamic_shapes: tuple[dict[int, Any], ...],
    target: str,
    path: Path,
) -> dict[str, float]:
    """Export ``model`` at the target's device and precision and compile it into ``path``."""
    package = ServingCandidate.parse(target)
    device_type, dtype = package.device, DTYPES[package.precision]
    prepared = copy.deepcopy(model).eval().to(device=device_type, dtype=dtype)
    inputs = tuple(x.to(device_type, dtype) if x.is_floating_point() else x.to(device_type) for x in example)
    figures = export_and_compile(prepared, inputs, dynamic_shapes, path)
    print(f"[export] compiled {path.name}: {figures}")
    return figures


def check_record(forward: Callable[..., torch.Tensor], check: Batch) -> list[list[float]]:
    """A candidate's class probabilities on the check inputs, as the worker compares them."""
    with torch.inference_mode():
        probs = torch.softmax(forward(*check).float(), dim=-1).cpu()
    return [[round(float(value), 7) for value in row] for row in probs]


def build_and_gate(
    eager: torch.nn.Module | None,
    torchscript: torch.jit.ScriptModule | None,
    out: Path,
    settings: CompileSettings,
    data: GateData,
    int8: Int8Plan | None = None,
    no_torchscript: str = "",
) -> GateOutcome:
    """Compile the targets into ``out`` and gate them and the reduced-precision TorchScript
    candidates against fp32 TorchScript on held-out batches; drop the packages that fail.

    Every candidate's outputs on the check inputs are recorded (the worker's load check),
    and every CPU candidate a worker may serve is timed (``auto``'s measurement).
    ``int8`` says how a ``cpu-int8`` target is quantized and what its kind's figures may
    lose (default: dynamic linear layers, the default limits).
    A target that cannot be built from this model (no eager model, an operator export or
    quantization does not take) is skipped with its reason: TorchScript serves regardless.
    Without ``torchscript`` (``no_torchscript`` says why) the eager model is the reference,
    each targeted device gets its fp32 package too, and a NothingToServeError is raised
    when no package passes."""
    for stale in out.glob("model.*.pt2"):
        stale.unlink()
    outcome = GateOutcome(settings.max_batch_size, settings.enforce_gates, no_torchscript=no_torchscript)
    reference_model = torchscript if torchscript is not None else eager
    assert reference_model is not None, "a model to gate against: TorchScript or the eager model"
    reference = probabilities(reference_model, data.batches)
    outcome.reference_figures = data.score(reference) if data.score else {}
    full_batch = data.batches[0]
    singles = data.singles
    if singles is None:
        singles = [tuple(x[i : i + 1] for x in full_batch) for i in range(len(full_batch[0]))]
    candidates: list[tuple[ServingCandidate, ServedModel]] = []
    timed: dict[str, ServedModel] = {}
    if torchscript is not None:
        fp32 = ServedModel(torchscript, "torchscript", "fp32", BASELINE.file_name, 0.0)
        outcome.check_outputs[BASELINE.name] = check_record(fp32, data.check)
        serving = optimize_for_serving(torchscript) if data.optimize else torchscript
        timed[BASELINE.name] = ServedModel(serving, "torchscript", "fp32", BASELINE.file_name, 0.0)
        for precision in settings.torchscript_precisions:
            served = ServedModel(torchscript, "torchscript", precision, BASELINE.file_name, 0.0)
            candidates.append((ServingCandidate("torchscript", "cpu", precision), served))
    targets = settings.targets
    if torchscript is None:  # each device's fp32 package stands in for fp32 TorchScript
        fp32 = [ServingCandidate("aoti", ServingCandidate.parse(t).device, "fp32").target for t in targets]
        targets = tuple(dict.fromkeys([*targets, *fp32]))
    plan = int8 or Int8Plan()
    for target in targets:
        package = ServingCandidate.parse(target)
        path = out / package.file_name
        if eager is None:
            outcome.skip(target, "a TorchScript model cannot be exported to .pt2")
            continue
        try:
            if package.precision == "int8":
                outcome.int8["calibration"] = plan.source
                figures = compile_int8(
                    eager, full_batch, data.dynamic_shapes, path, plan.calibration, plan.prepare
                )
            else:
                figures = compile_package(eager, full_batch, data.dynamic_shapes, target, path)
            compiled = load_compiled(path, torch.device(package.device), package.precision)
        except Exception as exc:
            first_line = (str(exc).strip().splitlines() or [""])[0][:300]
            outcome.skip(target, f"{type(exc).__name__}: {first_line}")
            path.unlink(missing_ok=True)
            continue
        outcome.compile_figures[target] = figures
        candidates.append((package, compiled))
    for candidate, served in candidates:

        def forward(
            *inputs: torch.Tensor, served: ServedModel = served, device: str = candidate.device
        ) -> torch.Tensor:
            return served(*(x.to(device) for x in inputs)).cpu()

        result = judge(
            candidate.name,
            served.precision,
            reference,
            probabilities(forward, data.batches),
            data.score,
            batch_independence(forward, full_batch, singles),
            **gate_limits(served.precision, plan),
            expected=outcome.reference_figures,
        )
        if served.precision == "int8":
            problem = quantized_ops_problem(outcome.compile_figures[candidate.target])
            result.failures.extend([problem] if problem else [])
        print(f"[export] gate {result.summary()}")
        outcome.results.append(result)
        outcome.check_outputs[candidate.name] = check_record(forward, data.check)
        servable = result.passed or not settings.enforce_gates
        if servable and candidate.device == "cpu":
            timed[candidate.name] = served
        if candidate.runtime == "aoti" and servable:
            outcome.compiled_models.append(served.source)
        elif candidate.runtime == "aoti":
            (out / served.source).unlink()
    if torchscript is None and not outcome.compiled_models:
        not_built = [f"{target} not built ({why})" for target, why in outcome.skipped.items()]
        raise NothingToServeError(
            f"{no_torchscript}, and no AOTInductor package passed to serve instead ("
            + "; ".join(not_built + [f"{name} failed its gates" for name in outcome.failed] or ["no target"])
            + "): keep compile.targets at host and check the gates in the build log"
        )
    outcome.timings = time_candidates(timed, full_batch)
    print(
        f"[export] timed per batch of {outcome.timings.batch_size} on {TIMING_THREADS} thread(s): {outcome.timings.ms}"
    )
    return outcome
