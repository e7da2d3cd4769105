"""The models a sweep can time: built archives from the manifest, or random-weight stand-ins
of the production shapes for a machine where nothing was built (timing only). How to load
each is its kind's (``tsbatch/kinds/<kind>/sweep.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from batchkit.loader import ServedModel, host_here, load_compiled
from batchkit.planner import usable_candidates
from tsbatch.analysis.sweep.inputs import Scenario
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import Manifest, ModelSpec, load_manifest
from tsbatch.archive.variants import archive_config


@dataclass
class SweptModel:
    """A model to sweep: the module, what it is (for the report) and its input scenarios."""

    name: str  # the row label, e.g. "resnet18" or "resnet18-imagenet"
    sla_model: str  # the model whose SLA gives the default latency budget
    description: str
    module: torch.nn.Module
    scenarios: list[Scenario]
    # fp32 rows run the module frozen and optimized, as the workers run it; autocast rows
    # run the plain module.
    optimize: bool = False
    # A compiled .pt2 runs in the one precision it was built for, and its drift is measured
    # against the fp32 TorchScript module (``reference``) at batch 1.
    precisions: tuple[str, ...] | None = None
    reference: torch.nn.Module | None = None


class CompiledModule(torch.nn.Module):
    """An AOTInductor package as a module, so a sweep runs it like the TorchScript ones."""

    def __init__(self, served: ServedModel) -> None:
        super().__init__()
        self.served = served

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.served(*inputs)


def compiled_swept_models(base: SweptModel, artifact_dir: Path, device_type: str) -> list[SweptModel]:
    """One swept model per package the planner finds usable on this device (gated, present,
    built for a CPU like this one): the sweep's runtime dimension. Batches above the
    export bound run in slices, as a worker runs them, so the bound does not exclude one."""
    config = archive_config(artifact_dir)
    device = torch.device(device_type)
    usable, _ = usable_candidates(config, host_here(artifact_dir, device, max_batch_size=1))
    swept_models = []
    for package in (candidate for candidate in usable if candidate.runtime == "aoti"):
        served = load_compiled(artifact_dir / package.file_name, device, package.precision)
        served.max_batch = config.compiled_max_batch_size
        swept_models.append(
            SweptModel(
                name=f"{base.name}-aoti",
                sla_model=base.sla_model,
                description=f"{package.file_name} (AOTInductor, {package.precision}, loaded in {served.load_seconds:.2f}s)",
                module=CompiledModule(served),
                scenarios=base.scenarios,
                precisions=(package.precision,),
                reference=base.module,
            )
        )
    return swept_models


def resolve_swept_model(name: str, work_dir: Path, build_dir: Path | None = None) -> SweptModel:
    """A swept model by name: a manifest model whose archive is built, or ``<model>-<stand-in>``,
    its kind's random-weight stand-in of the same shape."""
    manifest = load_manifest(build_dir=build_dir)
    stand_ins = stand_in_specs(manifest)
    if name in stand_ins:
        return stand_ins[name].kind.swept_models().stand_in(stand_ins[name], work_dir)
    spec = manifest.model(name)
    missing = [
        f
        for f in (artifacts.MODEL_FILE, artifacts.HANDLER_CONFIG_FILE)
        if not (spec.artifact_dir / f).exists()
    ]
    handler = spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE
    if missing and handler.exists() and not artifacts.read_json(handler).get("model_file", True):
        raise FileNotFoundError(
            f"{name}: its archive has no TorchScript (an exported program that does not trace into "
            "one), and the in-process sweep measures TorchScript: sweep it through TorchServe (`tsbatch tune`)"
        )
    if missing:
        raise FileNotFoundError(f"{name}: {spec.artifact_dir} lacks {missing}; run `make archive` first")
    return spec.kind.swept_models().archive_swept_model(name, spec.artifact_dir)


def stand_in_specs(manifest: Manifest) -> dict[str, ModelSpec]:
    """The stand-in names (``<model>-<its kind's stand_in>``) and the model each mimics."""
    return {f"{name}-{spec.kind.stand_in}": spec for name, spec in manifest.models.items()}


def resolve_swept_models(
    name: str, work_dir: Path, build_dir: Path | None = None, device_type: str = "cpu"
) -> list[SweptModel]:
    """:func:`resolve_swept_model` and, for a built archive, its compiled packages."""
    base = resolve_swept_model(name, work_dir, build_dir)
    manifest = load_manifest(build_dir=build_dir)
    if name in stand_in_specs(manifest):
        return [base]
    return [base, *compiled_swept_models(base, manifest.model(name).artifact_dir, device_type)]
