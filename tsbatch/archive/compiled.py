"""AOTInductor packages beside the TorchScript model, and the gates that decide what is served.

``torch.export`` traces the eager model with a dynamic batch dimension (and sequence length
for text) and ``torch._inductor.aoti_compile_and_package`` compiles it, with freezing, into
a ``.pt2`` for one device and precision. Compiling takes tens of seconds and the result
runs only on the kind of machine it was built on, so the build compiles only what the
build host itself would serve (``targets: host``): fp32 on a CPU without native bf16, bf16
on one with it, and the GPU's choice where CUDA works. A CUDA package is built on a GPU
host (``scripts/gpu_check.sh`` or ``tsbatch archive`` there). On a CPU with VNNI or
AMX-int8 the host also gets ``cpu-int8``, quantized by ``tsbatch.archive.int8`` instead.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from batchkit.loader import ServedModel, candidate_name, compiled_file_name, load_compiled
from batchkit.precision import (
    DTYPES,
    choose_precision,
    compiled_code_flags,
    cpu_model_name,
    cuda_problem,
    native_cpu_int8,
)
from batchkit.worker import optimize_for_serving
from tsbatch.archive.aoti import export_and_compile
from tsbatch.archive.gates import Batch, GateResult, Scorer, batch_independence, judge, probabilities
from tsbatch.archive.int8.candidate import Int8Plan, gate_limits, int8_timing, quantized_ops_problem
from tsbatch.archive.int8.quantize import compile_int8
from tsbatch.archive.schema import Compile
from tsbatch.archive.timing import batch_ms

# At fp32, ``auto`` serves a package only when the build timed it this much faster than
# TorchScript as a worker serves it: a smaller lead is within run-to-run noise, and
# TorchScript is the artifact users asked for.
AUTO_MARGIN = 0.1
# Threads the timing runs on: what one worker gets by default (config.properties).
TIMING_THREADS = 1


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
    auto_runtime: dict[str, str] = field(default_factory=dict)
    int8: dict[str, Any] = field(default_factory=dict)  # calibration, build-time timing
    reference_figures: dict[str, float] = field(default_factory=dict)  # fp32 TorchScript's scores
    skipped: dict[str, str] = field(default_factory=dict)  # target -> why no package was built

    def skip(self, target: str, why: str) -> None:
        """Record that ``target`` has no package, and why (build info, report, log)."""
        self.skipped[target] = why
        print(f"[export] {target}: no package, serving TorchScript ({why})")

    @property
    def failed(self) -> list[str]:
        return [result.candidate for result in self.results if self.enforced and not result.passed]

    def servable_check_outputs(self) -> dict[str, list[list[float]]]:
        """The records of the candidates a worker may serve (fp32 TorchScript always)."""
        failed = set(self.failed)
        return {name: outputs for name, outputs in self.check_outputs.items() if name not in failed}

    def handler_fields(self) -> dict[str, Any]:
        return {
            "compiled_models": self.compiled_models,
            "compiled_max_batch_size": self.max_batch_size if self.compiled_models else 0,
            "failed_gates": self.failed,
            "check_outputs": self.servable_check_outputs(),
            "auto_runtime": self.auto_runtime,
            "compiled_cpu_flags": compiled_code_flags() if self.compiled_models else [],
            "int8_speedup": float(self.int8.get("timing", {}).get("speedup", 0.0)),
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
        }


def host_targets() -> list[str]:
    """What this build machine would serve: its CPU's automatic precision, and its GPU's."""
    targets = [f"cpu-{choose_precision('auto', torch.device('cpu')).precision}"]
    if cuda_problem() is None:
        targets.append(f"cuda-{choose_precision('auto', torch.device('cuda')).precision}")
    if native_cpu_int8() and "cpu-int8" not in targets:
        targets.append("cpu-int8")
    return targets


def compile_settings(section: Compile) -> CompileSettings:
    """The ``compile:`` section; ``host`` (the default of both lists) means what this machine
    serves: emulated bf16 gates cost minutes on a large input, so they run only when asked."""
    precisions: Sequence[str] = section.torchscript_precisions
    if precisions == "host":
        precisions = [
            target.split("-")[1] for target in host_targets() if target.endswith(("-bf16", "-fp16"))
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
    device_type, precision = target.split("-")
    dtype = DTYPES[precision]
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


def time_runtimes(compiled: ServedModel, torchscript: ServedModel, batch: Batch) -> dict[str, Any]:
    """Time a fp32 package against TorchScript as a worker runs them, once, at build: the
    runtime ``auto`` serves, with the figures that decided it."""
    threads = torch.get_num_threads()
    torch.set_num_threads(TIMING_THREADS)
    try:
        compiled_ms, torchscript_ms = batch_ms(compiled, batch), batch_ms(torchscript, batch)
    finally:
        torch.set_num_threads(threads)
    runtime = "aoti" if compiled_ms <= torchscript_ms * (1 - AUTO_MARGIN) else "torchscript"
    print(
        f"[export] runtime auto: {compiled.source} {compiled_ms:.1f} ms, TorchScript {torchscript_ms:.1f} ms "
        f"per batch of {len(batch[0])} on {TIMING_THREADS} thread -> {runtime}"
    )
    return {
        "auto_runtime": runtime,
        "timed_ms": {"aoti": round(compiled_ms, 2), "torchscript": round(torchscript_ms, 2)},
        "timed_batch": len(batch[0]),
        "timed_threads": TIMING_THREADS,
        "timed_cpu": cpu_model_name(),
        "margin": AUTO_MARGIN,
    }


def build_and_gate(
    eager: torch.nn.Module | None,
    torchscript: torch.jit.ScriptModule,
    out: Path,
    settings: CompileSettings,
    data: GateData,
    int8: Int8Plan | None = None,
) -> GateOutcome:
    """Compile the targets into ``out`` and gate them and the reduced-precision TorchScript
    candidates against fp32 TorchScript on held-out batches; drop the packages that fail.

    Every candidate's outputs on the check inputs are recorded (the worker's load check),
    and each fp32 package is timed against TorchScript (the worker's ``auto`` runtime).
    ``int8`` says how a ``cpu-int8`` target is quantized (default: dynamic linear layers).
    A target that cannot be built from this model (no eager model, an operator export or
    quantization does not take) is skipped with its reason: TorchScript serves regardless."""
    for stale in out.glob("model.*.pt2"):
        stale.unlink()
    outcome = GateOutcome(settings.max_batch_size, settings.enforce_gates)
    reference = probabilities(torchscript, data.batches)
    outcome.reference_figures = data.score(reference) if data.score else {}
    full_batch = data.batches[0]
    singles = data.singles
    if singles is None:
        singles = [tuple(x[i : i + 1] for x in full_batch) for i in range(len(full_batch[0]))]
    fp32 = ServedModel(torchscript, "torchscript", "fp32", "model.pt", 0.0)
    outcome.check_outputs["torchscript-fp32"] = check_record(fp32, data.check)
    candidates: list[tuple[str, ServedModel]] = []
    for precision in settings.torchscript_precisions:
        served = ServedModel(torchscript, "torchscript", precision, "model.pt", 0.0)
        candidates.append((candidate_name("torchscript", "cpu", precision), served))
    for target in settings.targets:
        device_type, precision = target.split("-")
        path = out / compiled_file_name(device_type, precision)
        if eager is None:
            outcome.skip(target, "a TorchScript model cannot be exported to .pt2")
            continue
        try:
            if precision == "int8":
                plan = int8 or Int8Plan()
                outcome.int8["calibration"] = plan.source
                figures = compile_int8(eager, full_batch, data.dynamic_shapes, path, plan.calibration)
            else:
                figures = compile_package(eager, full_batch, data.dynamic_shapes, target, path)
            compiled = load_compiled(path, torch.device(device_type), precision)
        except Exception as exc:
            first_line = (str(exc).strip().splitlines() or [""])[0][:300]
            outcome.skip(target, f"{type(exc).__name__}: {first_line}")
            path.unlink(missing_ok=True)
            continue
        outcome.compile_figures[target] = figures
        candidates.append((candidate_name("aoti", device_type, precision), compiled))
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
            probabilities(forward, data.batches),
            data.score,
            batch_independence(forward, full_batch, singles),
            **gate_limits(served.precision),
            expected=outcome.reference_figures,
        )
        if served.precision == "int8":
            problem = quantized_ops_problem(outcome.compile_figures[name.removeprefix("aoti-")])
            result.failures.extend([problem] if problem else [])
        print(f"[export] gate {result.summary()}")
        outcome.results.append(result)
        outcome.check_outputs[name] = check_record(forward, data.check)
        if served.runtime != "aoti":
            continue
        if result.passed or not settings.enforce_gates:
            outcome.compiled_models.append(served.source)
            if served.precision == "fp32" and device == "cpu":
                serving = optimize_for_serving(torchscript) if data.optimize else torchscript
                timing = time_runtimes(
                    served, ServedModel(serving, "torchscript", "fp32", "model.pt", 0.0), full_batch
                )
                outcome.compile_figures[f"{device}-fp32"].update(timing)
                outcome.auto_runtime[f"{device}-fp32"] = timing["auto_runtime"]
        else:
            (out / served.source).unlink()
    if compiled_file_name("cpu", "int8") in outcome.compiled_models:
        passed = {result.candidate for result in outcome.results if result.passed}
        outcome.int8["timing"] = int8_timing(candidates, passed, torchscript, full_batch)
    return outcome
