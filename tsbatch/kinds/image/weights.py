"""Where the image classifier's weights come from: a path the user gives (a state_dict for
the architecture, their own TorchScript artifact, or a ``torch.export`` program) or
torchvision's ImageNet weights (the local torch hub cache, then a download), with the
preprocessing each was trained with.

The offline digits model is a placeholder (a real classifier, but of 0-9 digits, served
under the manifest's model name), so a build only falls back to it when asked for explicitly:
``TSBATCH_ALLOW_DIGITS=1``, which ``make archive`` sets and the image build does not.
"""

from __future__ import annotations

import functools
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torchvision

from tsbatch.archive import artifacts
from tsbatch.environment import ALLOW_DIGITS_ENV, Environment
from tsbatch.kinds.image.schema import Preprocessing

# The class count the architecture is built with to find its last layer: a prime that no
# other layer's width matches.
PROBE_CLASSES = 7919
# The suffix ``torch.export.load`` requires of a saved program's file name.
EXPORTED_SUFFIX = ".pt2"


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


class ExportedClassifier(torch.nn.Module):
    """A ``torch.export`` program's module, usable where the build takes an eager model.

    ``ExportedProgram.module()`` refuses ``train()`` and ``eval()``: its graph keeps the mode
    it was captured in (export the model in eval mode), so here they only set the flag and
    copies, dtype casts and re-exports work as on any module."""

    def __init__(self, program: torch.export.ExportedProgram) -> None:
        super().__init__()
        self.program = program.module()

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.program(images)

    def train(self, mode: bool = True) -> ExportedClassifier:
        self.training = mode
        return self


def build_architecture(architecture: str, num_classes: int) -> torch.nn.Module:
    """The torchvision classification architecture (the manifest checked the name), untrained."""
    return torchvision.models.get_model(architecture, weights=None, num_classes=num_classes)


@functools.cache
def head_key(architecture: str) -> str:
    """The state_dict key of the architecture's last layer, whose first dimension is its
    class count (``fc.weight``, ``classifier.3.weight``...); built on the meta device (no
    memory) unless the builder computes with tensors (RegNet's widths)."""
    try:
        with torch.device("meta"):
            template = build_architecture(architecture, PROBE_CLASSES)
    except NotImplementedError:
        template = build_architecture(architecture, PROBE_CLASSES)
    state = template.state_dict()
    return [key for key, value in state.items() if value.dim() > 1 and value.shape[0] == PROBE_CLASSES][-1]


def class_count(model: Any, crop_size: int, what: str) -> int:
    """How many classes ``model`` scores, from one forward pass on two blank crops; an
    ExportError saying what to change when it cannot classify them."""
    try:
        with torch.inference_mode():
            output = model(torch.zeros(2, 3, crop_size, crop_size))
    except Exception as exc:
        raise ExportError(
            f"{what} cannot classify {crop_size}x{crop_size} images ({type(exc).__name__}: {exc}); "
            "set the image size it takes (`preprocessing`, or `weights.digits.image_size`)"
        ) from None
    if not isinstance(output, torch.Tensor) or output.dim() != 2 or len(output) != 2:
        shape = tuple(output.shape) if isinstance(output, torch.Tensor) else type(output).__name__
        raise ExportError(f"{what} must map (N, 3, H, W) images to (N, classes) logits; it gave {shape}")
    return int(output.shape[1])


def labels_for(labels: list[str] | None, num_classes: int, architecture: str) -> list[str]:
    """The labels file's labels, or for 1000 classes the ImageNet categories of torchvision."""
    if labels is None:
        if num_classes != 1000:
            raise ExportError(f"a {num_classes}-class model needs a labels file (`weights.labels`, --labels)")
        labels = list(torchvision_weights(architecture, "DEFAULT").meta["categories"])
    if len(labels) != num_classes:
        raise ExportError(f"labels file has {len(labels)} labels, model has {num_classes} classes")
    return labels


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
    """A user's ``torch.export`` program (``.pt2``), TorchScript artifact (packaged as is) or
    state_dict for the architecture; preprocessing as given, else torchvision's for the
    architecture. Labels: the file's, or torchvision's ImageNet categories for 1000 classes."""
    if not path.exists():
        raise ExportError(f"weights path {path} does not exist")
    preprocessing = _preprocessing_fields(
        preprocessing_section.model_dump()
        if preprocessing_section is not None
        else imagenet_preprocessing(torchvision_weights(architecture, "DEFAULT"))
    )
    labels = artifacts.read_labels(labels_path) if labels_path else None
    details = {"path": str(path), "sha256_16": artifacts.file_digest(path)}
    whole = whole_model(path)
    if whole is not None:
        module, what = whole
        eager = module if isinstance(module, ExportedClassifier) else None
        return ResolvedWeights(
            model=eager,
            scripted=None if eager is not None else module,
            labels=labels_for(labels, class_count(module, preprocessing["crop_size"], what), architecture),
            source=f"user {what}",
            details=details,
            **preprocessing,
        )
    state = torch.load(str(path), map_location="cpu", weights_only=True)
    if isinstance(state, dict) and "state_dict" in state:
        state = state["state_dict"]
    head = head_key(architecture)
    if not isinstance(state, dict) or head not in state:
        raise ExportError(
            f"{path} is neither TorchScript, a torch.export program ({EXPORTED_SUFFIX}) nor a "
            f"{architecture} state_dict (it has no `{head}`): check `architecture`"
        )
    num_classes = int(state[head].shape[0])
    labels = labels_for(labels, num_classes, architecture)
    model = build_architecture(architecture, num_classes)
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        raise ExportError(f"{path} is not a {architecture} state_dict: {exc}") from None
    return ResolvedWeights(
        model=model.eval(),
        scripted=None,
        labels=labels,
        source=f"user state_dict {path.name}",
        details=details,
        **preprocessing,
    )


def whole_model(path: Path) -> tuple[ExportedClassifier | torch.jit.ScriptModule, str] | None:
    """The network saved whole in ``path`` (a torch.export program, TorchScript) and what it
    is; None for weights alone (a state_dict)."""
    if path.suffix == EXPORTED_SUFFIX:
        return ExportedClassifier(load_exported_program(path)), f"exported program {path.name}"
    try:
        return torch.jit.load(str(path), map_location="cpu").eval(), f"TorchScript artifact {path.name}"
    except RuntimeError:
        return None


def load_exported_program(path: Path) -> torch.export.ExportedProgram:
    """A ``torch.export.save`` program taking one image batch of any size (the build exports
    and serves batches): an ExportError saying how to export it otherwise."""
    try:
        program = torch.export.load(str(path))
    except Exception as exc:
        raise ExportError(
            f"{path} is not a program saved by torch.export.save ({type(exc).__name__}); an "
            "AOTInductor package cannot be rebuilt: give the exported program, a state_dict or TorchScript"
        ) from None
    placeholders = {node.name: node for node in program.graph.nodes if node.op == "placeholder"}
    inputs = [placeholders[name].meta["val"] for name in program.graph_signature.user_inputs]
    how = "torch.export.export(model.eval(), (images,), dynamic_shapes=({0: torch.export.Dim('batch')},))"
    if len(inputs) != 1 or not isinstance(inputs[0], torch.Tensor) or inputs[0].dim() != 4:
        raise ExportError(f"{path.name} must take one (N, 3, H, W) image batch: export it with {how}")
    if isinstance(inputs[0].shape[0], int):
        raise ExportError(f"{path.name} takes batches of {inputs[0].shape[0]} only: export it with {how}")
    return program


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
