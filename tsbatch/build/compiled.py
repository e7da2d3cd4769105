"""AOTInductor packages beside the TorchScript model, and the gates that decide what is served.

``torch.export`` traces the eager model with a dynamic batch dimension (and sequence length
for text) and ``torch._inductor.aoti_compile_and_package`` compiles it, with freezing, into
a ``.pt2`` for one device and precision. Compiling takes tens of seconds and the result
runs only on the kind of machine it was built on, so the build compiles only what the
build host itself would serve (``targets: host``): fp32 on a CPU without native bf16, bf16
on one with it, and the GPU's choice where CUDA works. A CUDA package is built on a GPU
host (``scripts/gpu_check.sh`` or ``python -m scripts.build`` there). On a CPU with VNNI or
AMX-int8 the host also gets ``cpu-int8``, quantized by ``tsbatch.build.int8`` instead.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from batchkit.loader import ServedModel, compiled_file_name, load_compiled
from batchkit.precision import DTYPES, choose_precision, cuda_problem, native_cpu_int8
from tsbatch.build.aoti import export_and_compile
from tsbatch.build.gates import Batch, GateResult, Scorer, batch_independence, judge, probabilities
from tsbatch.build.int8.candidate import Int8Plan, gate_limits, int8_timing, quantized_ops_problem
from tsbatch.build.int8.quantize import compile_int8


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
    compile_figures: dict[str, dict[str, float]] = field(default_factory=dict)
    int8: dict[str, Any] = field(default_factory=dict)  # calibration, build-time timing

    @property
    def failed(self) -> list[str]:
        return [result.candidate for result in self.results if self.enforced and not result.passed]

    def handler_fields(self) -> dict[str, Any]:
        return {
            "compiled_models": self.compiled_models,
            "compiled_max_batch_size": self.max_batch_size if self.compiled_models else 0,
            "failed_gates": self.failed,
            "int8_speedup": float(self.int8.get("timing", {}).get("speedup", 0.0)),
        }

    def build_info(self) -> dict[str, Any]:
        return {
            "gates": {
                result.candidate: {**result.figures, "failures": result.failures} for result in self.results
            },
            "compiled": self.compile_figures,
            "int8": self.int8,
        }


def host_targets() -> list[str]:
    """What this build machine would serve: its CPU's automatic precision, and its GPU's."""
    targets = [f"cpu-{choose_precision('auto', torch.device('cpu')).precision}"]
    if cuda_problem() is None:
        targets.append(f"cuda-{choose_precision('auto', torch.device('cuda')).precision}")
    if native_cpu_int8() and "cpu-int8" not in targets:
        targets.append("cpu-int8")
    return targets


def compile_settings(settings: dict[str, Any]) -> CompileSettings:
    """The ``compile:`` section; ``host`` (the default of both lists) means what this machine
    serves: emulated bf16 gates cost minutes on a large input, so they run only when asked."""
    section = settings.get("compile") or {}
    targets = section.get("targets", "host")
    precisions = section.get("torchscript_precisions", "host")
    if precisions == "host":
        precisions = [
            target.split("-")[1] for target in host_targets() if target.endswith(("-bf16", "-fp16"))
        ]
    return CompileSettings(
        targets=tuple(host_targets() if targets == "host" else targets or ()),
        max_batch_size=int(section.get("max_batch_size", 16)),
        torchscript_precisions=tuple(dict.fromkeys(precisions)),
        enforce_gates=bool(section.get("enforce_gates", True)),
    )


def compile_package(
    model: torch.nn.Module,
    example: Batch,
    dynamic_shapes: tuple[dict[int, Any], ...],
    target: str,
    path: Path,
) -> dict[str, float]:
    """Export ``model`` at the target's device and precision and compile it into ``path``."""
    device_type, precision = target.split("-")
    dtype = DTYPES[precision]
    prepared = copy.deepcopy(model).eval().to(device=device_type, dtype=dtype)
    inputs = tuple(x.to(device_type, dtype) if x.is_floating_point() else x.to(device_type) for x in example)
    figures = export_and_compile(prepared, inputs, dynamic_shapes, path)
    print(f"[export] compiled {path.name}: {figures}")
    return figures


def build_and_gate(
    eager: torch.nn.Module | None,
    torchscript: torch.jit.ScriptModule,
    out: Path,
    settings: CompileSettings,
    batches: Sequence[Batch],
    score: Scorer | None,
    dynamic_shapes: tuple[dict[int, Any], ...],
    singles: Sequence[Batch] | None = None,
    int8: Int8Plan | None = None,
) -> GateOutcome:
    """Compile the targets into ``out`` and gate them and the reduced-precision TorchScript
    candidates against fp32 TorchScript on ``batches``; drop the packages that fail.

    ``singles`` are the first batch's items alone (default: sliced from it, which suits
    fixed-size inputs; text passes each row padded to its own length). ``int8`` says how a
    ``cpu-int8`` target is quantized (default: dynamic linear layers)."""
    for stale in out.glob("model.*.pt2"):
        stale.unlink()
    outcome = GateOutcome(settings.max_batch_size, settings.enforce_gates)
    reference = probabilities(torchscript, batches)
    full_batch = batches[0]
    if singles is None:
        singles = [tuple(x[i : i + 1] for x in full_batch) for i in range(len(full_batch[0]))]
    candidates: list[tuple[str, ServedModel]] = []
    for precision in settings.torchscript_precisions:
        served = ServedModel(torchscript, "torchscript", precision, "model.pt", 0.0)
        candidates.append((f"torchscript-{precision}", served))
    for target in settings.targets if eager is not None else ():
        device_type, precision = target.split("-")
        path = out / compiled_file_name(device_type, precision)
        if precision == "int8":
            plan = int8 or Int8Plan()
            outcome.int8["calibration"] = plan.source
            figures = compile_int8(eager, full_batch, dynamic_shapes, path, plan.calibration)
        else:
            figures = compile_package(eager, full_batch, dynamic_shapes, target, path)
        outcome.compile_figures[target] = figures
        candidates.append((f"aoti-{target}", load_compiled(path, torch.device(device_type), precision)))
    for name, served in candidates:
        device = "cuda" if name.startswith("aoti-cuda") else "cpu"

        def forward(
            *inputs: torch.Tensor, served: ServedModel = served, device: str = device
        ) -> torch.Tensor:
            return served(*(x.to(device) for x in inputs)).cpu()

        result = judge(
            name,
            served.precision,
            reference,
            probabilities(forward, batches),
            score,
            batch_independence(forward, full_batch, singles),
            **gate_limits(served.precision),
        )
        if served.precision == "int8":
            problem = quantized_ops_problem(outcome.compile_figures[name.removeprefix("aoti-")])
            result.failures.extend([problem] if problem else [])
        print(f"[export] gate {result.summary()}")
        outcome.results.append(result)
        if name.startswith("aoti-"):
            file_name = compiled_file_name(device, served.precision)
            if result.passed or not settings.enforce_gates:
                outcome.compiled_models.append(file_name)
            else:
                (out / file_name).unlink()
    if compiled_file_name("cpu", "int8") in outcome.compiled_models:
        passed = {result.candidate for result in outcome.results if result.passed}
        outcome.int8["timing"] = int8_timing(candidates, passed, torchscript, full_batch)
    return outcome
