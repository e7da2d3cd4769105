"""Archive variants: the exported files with runtime and precision pinned, and which of
them this machine can run (the rows of the benchmarks, the candidates of the tuner).

bf16 rows run only where the CPU computes bf16 natively: elsewhere PyTorch emulates it and
the figure would say nothing about the target hardware, so the row is skipped with that
reason. AOTInductor rows need the ``.pt2`` the build compiled for this machine. int8 is
an AOTInductor row only (no TorchScript form), run only on a CPU with VNNI / AMX-int8.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from batchkit.loader import compiled_file_name, int8_ready
from batchkit.precision import choose_precision, native_cpu_bf16, native_cpu_int8
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import ModelSpec


@dataclass(frozen=True)
class Variant:
    runtime: str
    precision: str

    @property
    def label(self) -> str:
        return f"{self.runtime} {self.precision}"


BASELINE = Variant("torchscript", "fp32")


def machine_variants(artifact_dir: Path) -> tuple[list[Variant], list[str]]:
    """The variants this machine can run (baseline first), and why the others are skipped."""
    config = artifacts.read_json(artifact_dir / artifacts.HANDLER_CONFIG_FILE)
    compiled = config.get("compiled_models", [])
    native_bf16 = native_cpu_bf16()
    runnable, skipped = [], []
    for precision in ("fp32", "bf16"):
        for runtime in ("torchscript", "aoti"):
            variant = Variant(runtime, precision)
            if precision == "bf16" and not native_bf16:
                skipped.append(
                    f"{variant.label}: no native bf16 on this CPU (no amx_bf16/avx512_bf16): emulated"
                )
            elif runtime == "aoti" and compiled_file_name("cpu", precision) not in compiled:
                skipped.append(
                    f"{variant.label}: the archive has no gated {compiled_file_name('cpu', precision)}"
                )
            elif f"{runtime}-{precision}" in config.get("failed_gates", []):
                skipped.append(f"{variant.label}: failed the build gates")
            else:
                runnable.append(variant)
    int8 = Variant("aoti", "int8")
    if not native_cpu_int8():
        skipped.append(f"{int8.label}: no VNNI/AMX-int8 on this CPU: oneDNN int8 may saturate")
    elif compiled_file_name("cpu", "int8") not in compiled:
        skipped.append(f"{int8.label}: the archive has no gated {compiled_file_name('cpu', 'int8')}")
    else:
        runnable.append(int8)
    return runnable, skipped


def default_variant(artifact_dir: Path) -> Variant:
    """The archive's configuration on this machine: its precision as a worker here chooses
    it, and its runtime setting (``auto``: the worker picks the package or TorchScript)."""
    config = artifacts.read_json(artifact_dir / artifacts.HANDLER_CONFIG_FILE)
    packages = config.get("compiled_models", [])
    ready = int8_ready(packages, config.get("int8_speedup", 0.0))
    precision = choose_precision(
        config.get("precision", "auto"), torch.device("cpu"), int8_ready=ready
    ).precision
    compiled = compiled_file_name("cpu", precision) in packages
    runtime = config.get("runtime", "auto") if compiled else "torchscript"
    return Variant(runtime, precision)


def variant_spec(spec: ModelSpec, work: Path, variant: Variant) -> ModelSpec:
    """A copy of the model's build directory whose handler config pins ``variant``."""
    build_dir = work / f"build-{variant.runtime}-{variant.precision}"
    target = build_dir / spec.name
    if not target.exists():
        shutil.copytree(spec.artifact_dir, target)
    path = target / artifacts.HANDLER_CONFIG_FILE
    config = artifacts.read_json(path)
    config.update(runtime=variant.runtime, precision=variant.precision)
    artifacts.write_json(path, config)
    return replace(spec, build_dir=build_dir)
