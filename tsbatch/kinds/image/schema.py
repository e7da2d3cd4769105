"""The manifest entry of an image classifier (``kind: image``): what the build reads, plus
the handler's keys generated from ``image_serving.config.ImageModelConfig``."""

from __future__ import annotations

import difflib
import functools
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, PositiveInt

from image_serving.config import ImageModelConfig
from tsbatch.archive.schema import Common, Compile, Fraction, Section, Verify, handler_model


class Digits(Section):
    """The offline fallback: the architecture trained on scikit-learn's handwritten digits
    (``image_size`` must suit it: some need larger inputs than the default)."""

    image_size: Annotated[int, Field(ge=16)] = 32
    epochs: PositiveInt = 6
    batch_size: PositiveInt = 64
    learning_rate: Annotated[float, Field(gt=0.0)] = 2e-3
    seed: int = 0
    min_accuracy: Fraction = 0.95
    threads: PositiveInt | None = None  # training threads (default: torch's, every core)


class Weights(Section):
    """Tried in order: ``path``, torchvision's ``torchvision`` weights, then ``digits``."""

    # A state_dict for ``architecture``, a TorchScript file or a ``torch.export.save`` program (.pt2).
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


class Calibration(Section):
    """The images static int8 is calibrated on (``tsbatch.kinds.image.calibration``)."""

    images: str | None = None  # a folder of your images; default: the build's own data
    count: PositiveInt = 256


class ImageCompile(Compile):
    """The compile section with the images static int8 is calibrated on."""

    calibration: Calibration = Field(default_factory=Calibration)


@functools.cache
def image_architectures() -> tuple[str, ...]:
    """torchvision's classification model names (imported here: only image entries need it)."""
    import torchvision

    return tuple(torchvision.models.list_models(module=torchvision.models))


def torchvision_classifier(value: str) -> str:
    """The architecture name, if torchvision has a classifier of that name."""
    known = image_architectures()
    if value in known:
        return value
    close = difflib.get_close_matches(value, known, n=3, cutoff=0.6)
    hint = f"close matches: {', '.join(close)}" if close else "see torchvision.models.list_models()"
    raise ValueError(f"{value!r} is not a torchvision classification architecture ({hint})")


class ImageBuild(Common):
    """An image classifier (``kind: image``): any torchvision classification architecture."""

    kind: Literal["image"]
    compile: ImageCompile = ImageCompile()
    weights: Weights = Weights()
    preprocessing: Preprocessing | None = None
    verify: Verify = Verify(batch_sizes=(1, 4))


ImageModel = handler_model(
    "ImageModel",
    ImageBuild,
    ImageModelConfig,
    {
        "architecture": Annotated[str, AfterValidator(torchvision_classifier)],
        "max_image_pixels": PositiveInt,
        "optimize": bool,
    },
)
