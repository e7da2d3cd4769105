"""Export the ResNet image classifier to TorchScript and verify it.

Weights are taken from, in order: a path the user gives (state_dict or their own
TorchScript artifact plus labels), torchvision's ImageNet weights (local torch hub cache,
then a download), and offline the fallback: the same architecture trained here on
scikit-learn's bundled handwritten digits. Whatever is used is recorded in the artifact.
The build fails (non-zero exit) when verification or the accuracy gate fails.
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torchvision
from PIL import Image

from batchkit.runtime import optimize_for_serving
from tsbatch.build import artifacts
from tsbatch.build.manifest import DEFAULT_MANIFEST, ModelSpec, load_manifest

SUPPORTED_ARCHITECTURES = ("resnet18", "resnet34", "resnet50")
DIGITS_MEAN = (0.5, 0.5, 0.5)
DIGITS_STD = (0.5, 0.5, 0.5)


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
    path: Path, labels_path: Path | None, architecture: str, settings: dict
) -> ResolvedWeights:
    """A user's TorchScript artifact (packaged as is) or a state_dict for the architecture."""
    if not path.exists():
        raise ExportError(f"weights path {path} does not exist")
    preprocessing = settings.get("preprocessing") or imagenet_preprocessing(
        torchvision_weights(architecture, "DEFAULT")
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


def digit_images(images: np.ndarray) -> list[Image.Image]:
    """scikit-learn digits (8x8, ink 0..16) as dark-on-white RGB pictures."""
    pixels = (255 - np.clip(images, 0, 16) * (255 / 16)).astype(np.uint8)
    return [Image.fromarray(p, mode="L").convert("RGB") for p in pixels]


def train_on_digits(architecture: str, options: dict[str, Any]) -> ResolvedWeights:
    """Train the architecture on real handwritten digits; fail if held-out accuracy is low."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from torchvision.transforms import v2

    from batchkit.images import preprocess

    seed = int(options.get("seed", 0))
    size = int(options.get("image_size", 32))
    epochs = int(options.get("epochs", 6))
    batch_size = int(options.get("batch_size", 64))
    torch.manual_seed(seed)
    generator = np.random.default_rng(seed)
    digits = load_digits()
    train_x, test_x, train_y, test_y = train_test_split(
        digits.images, digits.target, test_size=0.2, random_state=seed, stratify=digits.target
    )
    augment = v2.RandomAffine(degrees=10, translate=(0.08, 0.08), scale=(0.9, 1.1), fill=255)

    def tensors(images: list[Image.Image], augmented: bool) -> torch.Tensor:
        out = []
        for image in images:
            if augmented:
                image = augment(image)
            out.append(preprocess(image, size, size, DIGITS_MEAN, DIGITS_STD))
        return torch.stack(out)

    train_images, test_images = digit_images(train_x), digit_images(test_x)
    test_tensor = tensors(test_images, augmented=False)
    model = build_architecture(architecture, 10)
    optimizer = torch.optim.AdamW(model.parameters(), lr=float(options.get("learning_rate", 2e-3)))
    steps = epochs * int(np.ceil(len(train_images) / batch_size))
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=float(options.get("learning_rate", 2e-3)), total_steps=steps
    )
    labels_tensor = torch.as_tensor(train_y)
    started = time.perf_counter()
    for epoch in range(epochs):
        model.train()
        inputs = tensors(train_images, augmented=True)
        order = torch.as_tensor(generator.permutation(len(train_images)))
        total_loss = 0.0
        for start in range(0, len(order), batch_size):
            index = order[start : start + batch_size]
            loss = torch.nn.functional.cross_entropy(model(inputs[index]), labels_tensor[index])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            total_loss += float(loss.detach()) * len(index)
        accuracy = evaluate(model, test_tensor, test_y)
        print(
            f"[export] digits epoch {epoch + 1}/{epochs} loss {total_loss / len(order):.4f} "
            f"held-out accuracy {accuracy:.4f} ({time.perf_counter() - started:.0f}s)",
            flush=True,
        )
    accuracy = evaluate(model, test_tensor, test_y)
    minimum = float(options.get("min_accuracy", 0.95))
    print(f"[export] digits held-out accuracy {accuracy:.4f} on {len(test_y)} images (gate {minimum})")
    if accuracy < minimum:
        raise ExportError(f"digits accuracy {accuracy:.4f} is below the gate {minimum}")
    return ResolvedWeights(
        model=model.eval(),
        scripted=None,
        labels=[str(d) for d in range(10)],
        resize_size=size,
        crop_size=size,
        mean=DIGITS_MEAN,
        std=DIGITS_STD,
        source=f"trained here on scikit-learn digits ({architecture}, seed {seed})",
        details={
            "dataset": "sklearn.datasets.load_digits",
            "train_images": len(train_y),
            "test_images": len(test_y),
            "test_accuracy": round(accuracy, 4),
            "epochs": epochs,
            "seconds": round(time.perf_counter() - started, 1),
        },
    )


def evaluate(model: torch.nn.Module, inputs: torch.Tensor, targets: np.ndarray) -> float:
    model.eval()
    with torch.inference_mode():
        predictions = torch.cat([model(chunk).argmax(1) for chunk in inputs.split(256)])
    return float((predictions.numpy() == targets).mean())


def resolve_weights(spec: ModelSpec, weights_path: Path | None, labels_path: Path | None) -> ResolvedWeights:
    settings = spec.settings
    architecture = settings.get("architecture", "resnet18")
    weights = settings.get("weights") or {}
    path = weights_path or (Path(weights["path"]) if weights.get("path") else None)
    labels = labels_path or (Path(weights["labels"]) if weights.get("labels") else None)
    if path is not None:
        return load_user_weights(path, labels, architecture, settings)
    if weights.get("torchvision"):
        resolved = load_torchvision_weights(
            architecture, weights["torchvision"], bool(weights.get("download", True))
        )
        if resolved is not None:
            return resolved
    print("[export] no pretrained weights available: training on scikit-learn digits")
    return train_on_digits(architecture, weights.get("digits") or {})


def verify(
    resolved: ResolvedWeights,
    scripted: torch.jit.ScriptModule,
    atol: float,
    batch_sizes: list[int],
    optimized: torch.jit.ScriptModule | None = None,
) -> dict[str, float]:
    """Scripted vs eager, batch N vs N single runs, and the module workers will run
    (frozen and optimized) vs the reference; raise ExportError beyond atol."""
    largest = max(batch_sizes)
    seeded = torch.Generator().manual_seed(1234)  # same inputs every build, global RNG untouched
    inputs = torch.randn(largest, 3, resolved.crop_size, resolved.crop_size, generator=seeded)
    report: dict[str, float] = {}
    with torch.inference_mode():
        singles = torch.cat([scripted(inputs[i : i + 1]) for i in range(largest)])
        reference = scripted(inputs)
        if resolved.model is not None:
            reference = resolved.model(inputs)
            report["max_abs_diff_scripted_vs_eager"] = float((reference - scripted(inputs)).abs().max())
        for size in batch_sizes:
            batched = scripted(inputs[:size])
            report[f"max_abs_diff_batch{size}_vs_single"] = float((batched - singles[:size]).abs().max())
        if optimized is not None:
            for size in batch_sizes:
                report[f"max_abs_diff_optimized_batch{size}_vs_reference"] = float(
                    (optimized(inputs[:size]) - reference[:size]).abs().max()
                )
    failures = {k: v for k, v in report.items() if not v <= atol}
    for key, value in report.items():
        print(f"[export] verify {key}: {value:.2e} ({'FAIL' if key in failures else 'ok'}, atol {atol:g})")
    if failures:
        raise ExportError(f"verification failed beyond atol {atol}: {failures}")
    return report


def export(spec: ModelSpec, weights_path: Path | None = None, labels_path: Path | None = None) -> Path:
    """Build ``build/<model>/``: TorchScript, labels, handler config and build info."""
    settings = spec.settings
    resolved = resolve_weights(spec, weights_path, labels_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # TorchScript is what TorchServe loads
        scripted = resolved.scripted or torch.jit.script(resolved.model)
    verify_settings = settings.get("verify") or {}
    atol = float(verify_settings.get("atol", 1e-4))
    optimize = bool(settings.get("optimize", True))
    report = verify(
        resolved,
        scripted,
        atol,
        [int(b) for b in verify_settings.get("batch_sizes", [1, 4])],
        optimized=optimize_for_serving(scripted) if optimize else None,
    )
    out = spec.artifact_dir
    out.mkdir(parents=True, exist_ok=True)
    scripted.save(str(out / artifacts.MODEL_FILE))
    artifacts.write_json(out / artifacts.LABELS_FILE, resolved.labels)
    handler_config = {
        "model_name": spec.name,
        "architecture": settings.get("architecture", "resnet18"),
        "model_file": artifacts.MODEL_FILE,
        "labels_file": artifacts.LABELS_FILE,
        "weights": resolved.source,
        "resize_size": resolved.resize_size,
        "crop_size": resolved.crop_size,
        "mean": list(resolved.mean),
        "std": list(resolved.std),
        "top_k": int(settings.get("top_k", 5)),
        "max_image_pixels": int(settings.get("max_image_pixels", 40_000_000)),
        "max_body_bytes": int(settings.get("max_body_bytes", 20 * 1024 * 1024)),
        "warmup_batch_sizes": list(settings.get("warmup_batch_sizes", [1])),
        "optimize": optimize,
        "optimize_atol": atol,
    }
    artifacts.write_json(out / artifacts.HANDLER_CONFIG_FILE, handler_config)
    artifacts.write_json(
        out / artifacts.BUILD_INFO_FILE,
        {
            "model": spec.name,
            "weights": resolved.source,
            "weights_details": resolved.details,
            "num_classes": len(resolved.labels),
            "verification": report,
            "torch": torch.__version__,
            "torchvision": torchvision.__version__,
        },
    )
    print(f"[export] {spec.name}: {resolved.source} -> {out / artifacts.MODEL_FILE}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--weights", type=Path, help="state_dict or TorchScript artifact to package")
    parser.add_argument("--labels", type=Path, help="labels file for --weights")
    args = parser.parse_args(argv)
    try:
        export(load_manifest(args.manifest).model(args.model), args.weights, args.labels)
    except ExportError as exc:
        print(f"[export] FAILED: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
