"""The models a sweep can time: built archives from the manifest, or random-weight stand-ins
of the production shapes for a machine where nothing was built (timing only)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from batchkit.config import ImageModelConfig
from batchkit.loader import ServedModel, host_here, load_compiled
from batchkit.planner import usable_candidates
from batchkit.worker import load_torchscript
from tsbatch.analysis.sweep.inputs import Scenario, image_scenario, text_scenarios
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import load_manifest
from tsbatch.archive.variants import archive_config
from tsbatch.paths import REPO_ROOT

IMAGENET_TARGET = "resnet18-imagenet"
INTENT_BASE_TARGET = "bert_intent-base"


@dataclass
class Target:
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


def compiled_targets(base: Target, artifact_dir: Path, device_type: str) -> list[Target]:
    """One target per package the planner finds usable on this device (gated, present,
    built for a CPU like this one): the sweep's runtime dimension. Batches above the
    export bound run in slices, as a worker runs them, so the bound does not exclude one."""
    config = archive_config(artifact_dir)
    device = torch.device(device_type)
    usable, _ = usable_candidates(config, host_here(artifact_dir, device, max_batch_size=1))
    targets = []
    for package in (candidate for candidate in usable if candidate.runtime == "aoti"):
        served = load_compiled(artifact_dir / package.file_name, device, package.precision)
        served.max_batch = config.compiled_max_batch_size
        targets.append(
            Target(
                name=f"{base.name}-aoti",
                sla_model=base.sla_model,
                description=f"{package.file_name} (AOTInductor, {package.precision}, loaded in {served.load_seconds:.2f}s)",
                module=CompiledModule(served),
                scenarios=base.scenarios,
                precisions=(package.precision,),
                reference=base.module,
            )
        )
    return targets


def archive_image_target(name: str, artifact_dir: Path) -> Target:
    handler = artifacts.read_json(artifact_dir / artifacts.HANDLER_CONFIG_FILE)
    optimize = bool(handler.get("optimize", ImageModelConfig.optimize))
    module = load_torchscript(
        artifact_dir / handler.get("model_file", artifacts.MODEL_FILE), torch.device("cpu")
    )
    weights = handler.get("weights", "weights not recorded") + (
        ", fp32 frozen + optimized" if optimize else ""
    )
    return Target(
        name=name,
        sla_model=name,
        description=f"{artifact_dir.relative_to(REPO_ROOT) if artifact_dir.is_relative_to(REPO_ROOT) else artifact_dir}"
        f"/model.pt ({handler.get('architecture', 'image model')}, {weights})",
        module=module.eval(),
        scenarios=[image_scenario(handler)],
        optimize=optimize,
    )


def imagenet_resnet_target() -> Target:
    """ImageNet-shaped resnet18 with RANDOM weights at 224x224 and the production
    preprocessing (resize 256, crop 224, ImageNet mean/std): right for timing, useless
    for predictions. Needs no download."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None, num_classes=1000).eval()
    reference = torchvision.models.ResNet18_Weights.DEFAULT.transforms()
    handler = {
        "resize_size": int(reference.resize_size[0]),
        "crop_size": int(reference.crop_size[0]),
        "mean": list(reference.mean),
        "std": list(reference.std),
    }
    return Target(
        name=IMAGENET_TARGET,
        sla_model="resnet18",
        description="torchvision resnet18, ImageNet shape (1000 classes), RANDOM weights - timing only; "
        "TorchScript via torch.jit.script, fp32 frozen + optimized as workers run it; 224x224 with "
        "the production preprocessing",
        module=torch.jit.script(model),
        scenarios=[image_scenario(handler)],
        optimize=True,
    )


def archive_text_target(name: str, artifact_dir: Path) -> Target:
    handler = artifacts.read_json(artifact_dir / artifacts.HANDLER_CONFIG_FILE)
    tokenizer_dir = artifact_dir / handler.get("tokenizer_dir", "tokenizer")
    module = torch.jit.load(
        str(artifact_dir / handler.get("model_file", artifacts.MODEL_FILE)), map_location="cpu"
    )
    return Target(
        name=name,
        sla_model=name,
        description=f"build/{name}/model.pt ({handler.get('base_model', 'text model')}, max_length {handler['max_length']})",
        module=module.eval(),
        scenarios=text_scenarios(tokenizer_dir, int(handler["max_length"])),
    )


def intent_base_target(work_dir: Path) -> Target:
    """The intent model's shape without its training: the base encoder with a RANDOM head
    (timing only), for a machine where build/bert_intent was not built."""
    from tsbatch.archive.intent.model import IntentClassifier, load_encoder, save_tokenizer

    settings = load_manifest().model("bert_intent").text
    max_length, base = settings.max_length, settings.base_model
    torch.manual_seed(0)
    model = IntentClassifier(load_encoder(base), num_labels=16).eval()
    tokenizer_dir = save_tokenizer(base, work_dir / "tokenizer", max_length)
    return Target(
        name=INTENT_BASE_TARGET,
        sla_model="bert_intent",
        description=f"{base} encoder + RANDOM 16-way head, eager PyTorch - timing only (build/bert_intent missing)",
        module=model,
        scenarios=text_scenarios(tokenizer_dir, max_length),
    )


def resolve_target(name: str, work_dir: Path, build_dir: Path | None = None) -> Target:
    """A target by name: one of the two stand-ins, or a manifest model whose archive is built."""
    if name == IMAGENET_TARGET:
        return imagenet_resnet_target()
    if name == INTENT_BASE_TARGET:
        return intent_base_target(work_dir)
    spec = load_manifest(build_dir=build_dir).model(name)
    missing = [
        f
        for f in (artifacts.MODEL_FILE, artifacts.HANDLER_CONFIG_FILE)
        if not (spec.artifact_dir / f).exists()
    ]
    if missing:
        raise FileNotFoundError(f"{name}: {spec.artifact_dir} lacks {missing}; run `make archive` first")
    if spec.kind == "image":
        return archive_image_target(name, spec.artifact_dir)
    return archive_text_target(name, spec.artifact_dir)


def resolve_targets(
    name: str, work_dir: Path, build_dir: Path | None = None, device_type: str = "cpu"
) -> list[Target]:
    """:func:`resolve_target` and, for a built archive, its compiled packages."""
    base = resolve_target(name, work_dir, build_dir)
    if name in (IMAGENET_TARGET, INTENT_BASE_TARGET):
        return [base]
    artifact_dir = load_manifest(build_dir=build_dir).model(name).artifact_dir
    return [base, *compiled_targets(base, artifact_dir, device_type)]
