"""The offline fallback: the manifest's image classifier architecture trained here on
scikit-learn's bundled handwritten digits (real data), so that a build without pretrained
weights still serves a real classifier; it fails below the manifest's accuracy gate.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from PIL import Image

from tsbatch.kinds.image.examples import ink_pictures
from tsbatch.kinds.image.schema import Digits
from tsbatch.kinds.image.weights import ExportError, ResolvedWeights, build_architecture, class_count

DIGITS_MEAN = (0.5, 0.5, 0.5)
DIGITS_STD = (0.5, 0.5, 0.5)


def train_on_digits(architecture: str, options: Digits) -> ResolvedWeights:
    """Train the architecture on real handwritten digits; fail if held-out accuracy is low."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from torchvision.transforms import v2

    from image_serving.images import preprocess

    seed, size, epochs, batch_size = options.seed, options.image_size, options.epochs, options.batch_size
    torch.manual_seed(seed)
    if options.threads:
        torch.set_num_threads(options.threads)
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

    train_images, test_images = ink_pictures(train_x), ink_pictures(test_x)
    test_tensor = tensors(test_images, augmented=False)
    train_tensor = tensors(train_images, augmented=False)
    model = build_architecture(architecture, 10)
    class_count(model.eval(), size, f"{architecture} at weights.digits.image_size {size}")
    optimizer = torch.optim.AdamW(model.parameters(), lr=options.learning_rate)
    steps = epochs * int(np.ceil(len(train_images) / batch_size))
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=options.learning_rate, total_steps=steps
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
        estimate_batch_norm(model, train_tensor, batch_size)
        accuracy = held_out_accuracy(model, test_tensor, test_y)
        print(
            f"[export] digits epoch {epoch + 1}/{epochs} loss {total_loss / len(order):.4f} "
            f"held-out accuracy {accuracy:.4f} ({time.perf_counter() - started:.0f}s)",
            flush=True,
        )
    accuracy = held_out_accuracy(model, test_tensor, test_y)
    minimum = options.min_accuracy
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
        held_out=(test_tensor, torch.as_tensor(test_y)),
        calibration=train_tensor,
    )


def estimate_batch_norm(model: torch.nn.Module, inputs: torch.Tensor, batch_size: int) -> None:
    """Set every BatchNorm's running statistics to their average over the training images.

    Training updates them by a momentum, which some architectures keep small (MobileNetV3:
    0.01): after a short training they still describe the untrained network, and the model
    scores at chance in eval mode although training went well."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    momenta = [norm.momentum for norm in norms]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # a cumulative average over the batches below
    model.train()
    with torch.no_grad():
        for chunk in inputs.split(batch_size):
            model(chunk)
    for norm, momentum in zip(norms, momenta, strict=True):
        norm.momentum = momentum


def held_out_accuracy(model: torch.nn.Module, inputs: torch.Tensor, labels: np.ndarray) -> float:
    model.eval()
    with torch.inference_mode():
        predictions = torch.cat([model(chunk).argmax(1) for chunk in inputs.split(256)])
    return float((predictions.numpy() == labels).mean())
