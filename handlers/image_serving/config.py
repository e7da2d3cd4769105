"""The image classifier's typed handler config, read from the archive's model-config.yaml
(``batchkit.config.from_mapping``): what its worker decodes and how."""

from __future__ import annotations

from dataclasses import dataclass, field

from batchkit.config import ModelConfig


@dataclass(frozen=True, kw_only=True)
class ReducedDecodeGate:
    """The build's check of reduced-size JPEG decoding (``image_serving.reduced``) on this model
    and real photos: top-1 agreement with reference decoding and the largest class
    probability difference; ``passed`` is what ``reducedDecode: auto`` serves by."""

    passed: bool = False
    photos: int = 0
    top1_agreement: float = 0.0
    max_probability_difference: float = 0.0


@dataclass(frozen=True, kw_only=True)
class ImageModelConfig(ModelConfig):
    """How the image classifier archive was built and must be fed."""

    architecture: str = "resnet18"
    weights: str
    resize_size: int
    crop_size: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    max_image_pixels: int = 40_000_000
    max_body_bytes: int = 16 * 1024 * 1024
    max_inputs_per_request: int = 32
    # Freeze + optimize_for_inference at load time (checked against the plain module
    # within optimize_atol; the worker falls back to the plain module otherwise).
    optimize: bool = True
    optimize_atol: float = 1e-4
    # Threads that decode one batch's images side by side: a whole number (1: inline, no
    # pool) or auto (per batch, by the pixels its images decode to: image_serving.pool), and how
    # JPEGs are decoded: auto, pil or tensor (image_serving.decode.image_decoder says how auto
    # chooses). Both come from the model's decodeThreads/decodePath in config.properties.
    decode_threads: int | str = "auto"
    decode_path: str = "auto"
    # JPEGs decoded at a reduced DCT scale (image_serving.reduced): auto (on when the build's
    # gate passed), on or off (bit-exact reference preprocessing); the model's reducedDecode.
    reduced_decode: str = "auto"
    reduced_decode_gate: ReducedDecodeGate = field(default_factory=ReducedDecodeGate)
