"""What this machine offers the toolkit (`make doctor`): the CPU features that decide
precision and kernels, the compiler AOTInductor needs, CUDA, and per built model what a
worker here would serve.

Every line comes from the planner the workers ask (``batchkit.planner``), with the
build's timings, so the report cannot disagree with what ``make serve`` then does.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path

import torch

from batchkit.loader import device_signature, host_here, package_mismatch
from batchkit.planner import Host, Plan, missing_cpu_flags, nothing_to_serve, plan
from batchkit.precision import cpu_flags, cpu_model_name, cuda_problem, flag_precision
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import load_manifest
from tsbatch.archive.variants import archive_config
from tsbatch.config.properties import model_settings, read_properties
from tsbatch.paths import DEFAULT_PROPERTIES
from tsbatch.settings.batch import BatchSettings

# The CPU flags that change what is served: bf16 and int8 dot products, and the ISA the
# compiled packages target.
RELEVANT_FLAGS = (
    "avx2",
    "avx512f",
    "avx512_bf16",
    "amx_bf16",
    "avx512_fp16",
    "avx512_vnni",
    "avx_vnni",
    "amx_int8",
)


def flag_lines(flags: set[str]) -> list[str]:
    return [f"  {flag:<12} {'yes' if flag in flags else 'no'}" for flag in RELEVANT_FLAGS]


def compiler_line() -> str:
    """The C++ compiler Inductor calls to compile packages (workers load them without one)."""
    for name in ("g++", "c++", "clang++"):
        path = shutil.which(name)
        if path:
            version = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
            return (
                f"  C++ compiler {path} ({version.stdout.splitlines()[0] if version.stdout else 'unknown'})"
            )
    return "  C++ compiler: none found (builds here compile no AOTInductor packages; serving built ones needs none)"


def cuda_lines() -> list[str]:
    problem = cuda_problem()
    driver = shutil.which("nvidia-smi")
    lines = [f"  torch {torch.__version__}, CUDA build {torch.version.cuda or 'none'}"]
    lines.append(f"  nvidia-smi: {driver or 'not found'}")
    if problem is None:
        names = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
        lines.append(
            f"  CUDA usable: {names}; auto picks {flag_precision('cuda', set(), torch.cuda.is_bf16_supported())[0]}"
        )
    else:
        lines.append(f"  CUDA not usable: {problem}")
    return lines


def model_plan(artifact_dir: Path, batch_size: int, host: Host | None = None) -> Plan | None:
    """What a CPU worker of this archive would try here and why (None: not built)."""
    if not (artifact_dir / artifacts.HANDLER_CONFIG_FILE).exists():
        return None
    host = host or host_here(artifact_dir, torch.device("cpu"), batch_size)
    return plan(archive_config(artifact_dir), host)


def package_line(artifact_dir: Path, planned: Plan) -> str | None:
    """Whether the first package the plan tries runs on this CPU (its build machine's ISA)."""
    packages = [candidate for candidate in planned.candidates if candidate.runtime == "aoti"]
    if not packages:
        return None
    package = artifact_dir / packages[0].file_name
    built_on = torch._C._aoti.AOTIModelPackageLoader.load_metadata_from_package(str(package), "model")
    missing = missing_cpu_flags(archive_config(artifact_dir), cpu_flags())
    problem = package_mismatch(built_on, device_signature(torch.device("cpu")))
    if missing:
        problem = f"needs {', '.join(missing)}, which this CPU lacks"
    return f"    {package.name}: {problem or 'runs on this CPU (built for ' + built_on.get('AOTI_CPU_ISA', '?') + ')'}"


def model_lines(name: str, artifact_dir: Path, batch_size: int) -> list[str]:
    """The plan of a CPU worker of this archive, as report lines."""
    planned = model_plan(artifact_dir, batch_size)
    if planned is None:
        return [f"  {name}: not built (make archive)"]
    if not planned.candidates:
        return [f"  {name}: serves nothing on this machine", f"    why {nothing_to_serve(planned)}"]
    lines = [f"  {name}: serves {planned.first.name}"]
    lines.append("    tries " + ", then ".join(candidate.name for candidate in planned.candidates))
    lines += [f"    why {reason}" for reason in planned.reasons]
    package = package_line(artifact_dir, planned)
    return lines + ([package] if package else [])


def report() -> list[str]:
    flags = cpu_flags()
    lines = [f"CPU: {cpu_model_name()} (torch kernels: {torch.backends.cpu.get_cpu_capability()})"]
    lines += flag_lines(flags)
    lines.append(compiler_line())
    lines.append("GPU:")
    lines += cuda_lines()
    lines.append("Models (a CPU worker with config.properties' batchSize):")
    properties = read_properties(DEFAULT_PROPERTIES)
    entries = model_settings(properties)
    for name, spec in load_manifest().models.items():
        settings = BatchSettings.configured(properties, name, entries.get(name, {}))
        lines += model_lines(name, spec.artifact_dir, settings.batch_size)
    return lines


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(
        description="Say what this machine offers (CPU features, compiler, CUDA) and, for each built "
        "model, what a worker here would serve and why."
    ).parse_args(argv)
    print("\n".join(report()))
    return 0
