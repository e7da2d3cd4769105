"""The image classifier in the in-process sweep: its built archive, or an ImageNet-shaped
stand-in of its architecture with random weights (timing only), fed digit images through
the handler's own preprocessing at the archive's input size."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from batchkit.worker import load_torchscript
from image_serving.config import ImageModelConfig
from tsbatch.analysis.sweep.inputs import POOL_SIZE, Scenario, cycle
from tsbatch.analysis.sweep.swept import SweptModel
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import ModelSpec
from tsbatch.archive.scripting import script
from tsbatch.kinds.image.examples import handwritten_digits
from tsbatch.kinds.image.schema import ImageModel
from tsbatch.paths import REPO_ROOT


def image_scenario(handler: dict[str, Any], pool_size: int = POOL_SIZE) -> Scenario:
    """Digit images preprocessed exactly as the handler does, at the archive's crop size."""
    from image_serving.images import preprocess

    resize, crop = int(handler["resize_size"]), int(handler["crop_size"])
    tensors = [
        preprocess(image, resize, crop, handler["mean"], handler["std"])
        for image in handwritten_digits(pool_size, size=max(64, resize))
    ]
    return Scenario(
        name=f"{crop}x{crop}",
        batch=lambda b, offset=0: (torch.stack(cycle(tensors, b, offset)),),
        single=lambda i: (tensors[i % len(tensors)].unsqueeze(0),),
    )


def archive_swept_model(name: str, artifact_dir: Path) -> SweptModel:
    handler = artifacts.read_json(artifact_dir / artifacts.HANDLER_CONFIG_FILE)
    optimize = bool(handler.get("optimize", ImageModelConfig.optimize))
    module = load_torchscript(
        artifact_dir / handler.get("model_file", artifacts.MODEL_FILE), torch.device("cpu")
    )
    weights = handler.get("weights", "weights not recorded") + (
        ", fp32 frozen + optimized" if optimize else ""
    )
    return SweptModel(
        name=name,
        sla_model=name,
        description=f"{artifact_dir.relative_to(REPO_ROOT) if artifact_dir.is_relative_to(REPO_ROOT) else artifact_dir}"
        f"/model.pt ({handler.get('architecture', 'image model')}, {weights})",
        module=module.eval(),
        scenarios=[image_scenario(handler)],
        optimize=optimize,
    )


def stand_in(spec: ModelSpec, work_dir: Path) -> SweptModel:
    """The model's architecture ImageNet-shaped with RANDOM weights at 224x224 and the
    production preprocessing (resize 256, crop 224, ImageNet mean/std): right for timing,
    useless for predictions. Needs no download."""
    import torchvision

    architecture = spec.entry_as(ImageModel).architecture
    torch.manual_seed(0)
    model = torchvision.models.get_model(architecture, weights=None, num_classes=1000).eval()
    reference = torchvision.models.get_model_weights(architecture).DEFAULT.transforms()
    handler = {
        "resize_size": int(reference.resize_size[0]),
        "crop_size": int(reference.crop_size[0]),
        "mean": list(reference.mean),
        "std": list(reference.std),
    }
    return SweptModel(
        name=f"{spec.name}-{spec.kind.stand_in}",
        sla_model=spec.name,
        description=f"torchvision {architecture}, ImageNet shape (1000 classes), RANDOM weights - timing only; "
        "TorchScript via torch.jit.script, fp32 frozen + optimized as workers run it; 224x224 with "
        "the production preprocessing",
        module=script(model),
        scenarios=[image_scenario(handler)],
        optimize=True,
    )
