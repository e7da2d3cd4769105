"""Where the ResNet's weights come from: a path the user gives (a state_dict, or their own
TorchScript artifact plus labels) or torchvision's ImageNet weights (the local torch hub
cache, then a download), with the preprocessing each was trained with.

The offline digits model is a placeholder (a real classifier, but of 0-9 digits, served
under the name ``resnet18``), so a build only falls back to it when asked for explicitly:
``TSBATCH_ALLOW_DIGITS=1``, which ``make archive`` sets and the image build does not.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torchvision

from tsbatch.archive import artifacts
from tsbatch.environment import ALLOW_DIGITS_ENV, Environment
from tsbatch.kinds.image.schema import Preprocessing

SUPPORTED_ARCHITECTURES = ("resnet18", "resnet34", "resnet50")


class ExportError(RuntimeError):
    """The artifact could not be built or did not pass verification."""


@dataclass
class ResolvedWeights:
    """A model ready to export, with everything the archive must record about it."""

    model: torch.nn.Module | None  # eager model (None for a user TorchScript artifact)
    scripted: torch.jit.ScriptModule | None
    labels: list[str]
    resize_size: int
    crop_size: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    source: str
    details: dict[str, Any]
    # Held-out (images, targets) the precision gates score on; None: no labelled data here.
    held_out: tuple[torch.Tensor, torch.Tensor] | None = None
    # Training images (preprocessed, not augmented) static int8 is calibrated on; None:
    # the build calibrates on the user's folder or says it has nothing better than noise.
    calibration: torch.Tensor | None = None


def build_architecture(architecture: str, num_classes: int) -> torch.nn.Module:
    if architecture not in SUPPORTED_ARCHITECTURES:
        raise ExportError(f"architecture {architecture!r} not in {SUPPORTED_ARCHITECTURES}")
    return torchvision.models.get_model(architecture, weights=None, num_classes=num_classes)


def imagenet_preprocessing(weights: Any) -> dict[str, Any]:
    reference = weights.transforms()
    return {
        "resize_size": int(reference.resize_size[0]),
        "crop_size": int(reference.crop_size[0]),
        "mean": tuple(float(v) for v in reference.mean),
        "std": tuple(float(v) for v in reference.std),
    }


def torchvision_weights(architecture: str, name: str) -> Any:
    enum = torchvision.models.get_model_weights(architecture)
    return enum.DEFAULT if name == "DEFAULT" else enum[name]


def cached_weights_path(weights: Any) -> Path:
    return Path(torch.hub.get_dir()) / "checkpoints" / Path(weights.url).name


def load_user_weights(
    path: Path,
    labels_path: Path | None,
    architecture: str,
    preprocessing_section: Preprocessing | None = None,
) -> ResolvedWeights:
    """A user's TorchScript artifact (packaged as is) or a state_dict for the architecture;
    preprocessing as given, else torchvision's for the architecture."""
    if not path.exists():
        raise ExportError(f"weights path {path} does not exist")
    preprocessing = (
        preprocessing_section.model_dump()
        if preprocessing_section is not None
        else imagenet_preprocessing(torchvision_weights(architecture, "DEFAULT"))
    )
    labels = artifacts.read_labels(labels_path) if labels_path else None
    try:
        scripted = torch.jit.load(str(path), map_location="cpu")
    except RuntimeError:
        scripted = None
    if scripted is not None:
        if labels is None:
            raise ExportError("a TorchScript artifact needs a labels file (--labels)")
        return ResolvedWeights(
            model=None,
            scripted=scripted.eval(),
            labels=labels,
            source=f"user TorchScript artifact {path.name}",
            details={"path": str(path), "sha256_16": artifacts.file_digest(path)},
            **_preprocessing_fields(preprocessing),
        )
    state = torch.load(str(path), map_location="cpu", weights_only=True)
    if isinstance(state, dict) and "state_dict" in state:
        state = state["state_dict"]
    if not isinstance(state, dict) or "fc.weight" not in state:
        raise ExportError(f"{path} is neither TorchScript nor a {architecture} state_dict")
    num_classes = int(state["fc.weight"].shape[0])
    if labels is None:
        if num_classes != 1000:
            raise ExportError(f"{num_classes}-class state_dict needs a labels file (--labels)")
        labels = list(torchvision_weights(architecture, "DEFAULT").meta["categories"])
    if len(labels) != num_classes:
        raise ExportError(f"labels file has {len(labels)} labels, model has {num_classes} classes")
    model = build_architecture(architecture, num_classes)
    model.load_state_dict(state)
    return ResolvedWeights(
        model=model.eval(),
        scripted=None,
        labels=labels,
        source=f"user state_dict {path.name}",
        details={"path": str(path), "sha256_16": artifacts.file_digest(path)},
        **_preprocessing_fields(preprocessing),
    )


def _preprocessing_fields(preprocessing: dict[str, Any]) -> dict[str, Any]:
    return {
        "resize_size": int(preprocessing["resize_size"]),
        "crop_size": int(preprocessing["crop_size"]),
        "mean": tuple(preprocessing["mean"]),
        "std": tuple(preprocessing["std"]),
    }


def load_torchvision_weights(architecture: str, name: str, allow_download: bool) -> ResolvedWeights | None:
    """torchvision's ImageNet weights from the hub cache, else downloaded; None if neither."""
    weights = torchvision_weights(architecture, name)
    cached = cached_weights_path(weights)
    if cached.exists():
        state = torch.load(str(cached), map_location="cpu", weights_only=True)
        origin = f"torch hub cache {cached}"
    elif allow_download:
        previous = socket.getdefaulttimeout()
        socket.setdefaulttimeout(20)
        try:
            state = weights.get_state_dict(progress=False, check_hash=True)
            origin = weights.url
        except Exception as exc:
            print(f"[export] torchvision weights unavailable ({type(exc).__name__}: {exc})")
            return None
        finally:
            socket.setdefaulttimeout(previous)
    else:
        return None
    model = build_architecture(architecture, len(weights.meta["categories"]))
    model.load_state_dict(state)
    return ResolvedWeights(
        model=model.eval(),
        scripted=None,
        labels=list(weights.meta["categories"]),
        source=f"torchvision {architecture} {weights.name}",
        details={"origin": origin},
        **_preprocessing_fields(imagenet_preprocessing(weights)),
    )


def require_digits_allowed(architecture: str) -> None:
    """Refuse the digits placeholder unless the build asked for it (ALLOW_DIGITS_ENV=1)."""
    if not Environment.read().allow_digits:
        raise ExportError(
            f"no pretrained {architecture} weights: give a state_dict or TorchScript artifact "
            "(models.yaml `weights.path`, or --weights), put torchvision's weights in the torch hub "
            "cache, or allow the download. The offline fallback (the architecture trained on "
            f"scikit-learn digits, labels 0-9) is a placeholder: set {ALLOW_DIGITS_ENV}=1 to build it "
            "anyway (`make archive` does; the image build takes --build-arg TSBATCH_ALLOW_DIGITS=1)."
        )
