"""The manifest entry of an image classifier (``kind: image``): what the build reads, plus
the handler's keys generated from ``batchkit.config.ImageModelConfig``."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, PositiveInt

from batchkit.config import ImageModelConfig
from tsbatch.archive.schema import Common, Fraction, Section, Verify, handler_model


class Digits(Section):
    """The offline fallback: the architecture trained on scikit-learn's handwritten digits."""

    image_size: Annotated[int, Field(ge=16)] = 32
    epochs: PositiveInt = 6
    batch_size: PositiveInt = 64
    learning_rate: Annotated[float, Field(gt=0.0)] = 2e-3
    seed: int = 0
    min_accuracy: Fraction = 0.95


class Weights(Section):
    """Tried in order: ``path``, torchvision's ``torchvision`` weights, then ``digits``."""

    path: str | None = None
    labels: str | None = None
    torchvision: str | None = "DEFAULT"
    download: bool = True
    digits: Digits = Digits()


class Preprocessing(Section):
    """Resize, crop and normalization for user weights (default: torchvision's for the architecture)."""

    resize_size: PositiveInt
    crop_size: PositiveInt
    mean: tuple[float, float, float]
    std: tuple[float, float, float]


class ImageBuild(Common):
    """An image classifier (``kind: image``): a torchvision ResNet."""

    kind: Literal["image"]
    weights: Weights = Weights()
    preprocessing: Preprocessing | None = None
    verify: Verify = Verify(batch_sizes=(1, 4))


ImageModel = handler_model(
    "ImageModel",
    ImageBuild,
    ImageModelConfig,
    {
        "architecture": Literal["resnet18", "resnet34", "resnet50"],
        "max_image_pixels": PositiveInt,
        "optimize": bool,
    },
)
