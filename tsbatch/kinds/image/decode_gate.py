"""The build's gate on reduced-size JPEG decoding (``image_serving.reduced``): the model being
built classifies real photos decoded both ways, and ``reducedDecode: auto`` serves reduced
decoding only where its answers stay those of the reference decoding.

The photos (``examples.photo``, JPEG quality 90, several aspects and crops) are sized for
the model: their shorter sides are 2 to 8 times twice its resize size, so each DCT
scale is used, at the margin (decoded exactly twice the resize size) and inside it. A
model that passes agrees on the top-1 of at least 99% of them and never disagrees where
the reference's top-1 leads its second by ``CONFIDENT_MARGIN`` or more.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from importlib.metadata import version
from pathlib import Path

import torch

from image_serving.config import ReducedDecodeGate
from image_serving.images import normalize_pixels, raw_pixels
from image_serving.reduced import SHARPNESS_MARGIN
from tsbatch.archive import artifacts
from tsbatch.cache import cached_bodies
from tsbatch.kinds.image import examples
from tsbatch.kinds.image.weights import ResolvedWeights

GATE_PHOTOS = 64
MIN_AGREEMENT = 0.99
CONFIDENT_MARGIN = 0.05
# Shorter side of each photo, in multiples of the smallest reduced decoding keeps: at 2, 4 and
# 8 the photo is decoded at 1/2, 1/4, 1/8 exactly at the margin; 3 and 6 inside it.
SIDE_FACTORS = (2.0, 3.0, 4.0, 6.0, 8.0)
ASPECTS = ((4, 3), (3, 4), (16, 9), (1, 1), (3, 2))
BATCH = 16
HEADING = "## Reduced-size JPEG decoding"
Model = Callable[[torch.Tensor], torch.Tensor]


@dataclasses.dataclass(frozen=True)
class GateFigures:
    """What the gate measured: per photo agreement, the largest difference, the verdict."""

    photos: int
    agreeing: int
    max_probability_difference: float
    confident_disagreements: int

    @property
    def agreement(self) -> float:
        return self.agreeing / self.photos if self.photos else 0.0

    @property
    def passed(self) -> bool:
        return self.agreement >= MIN_AGREEMENT and self.confident_disagreements == 0

    def record(self) -> ReducedDecodeGate:
        return ReducedDecodeGate(
            passed=self.passed,
            photos=self.photos,
            top1_agreement=round(self.agreement, 4),
            max_probability_difference=round(self.max_probability_difference, 4),
        )

    def summary(self) -> str:
        return (
            f"top-1 agreement {self.agreeing}/{self.photos} ({100 * self.agreement:.1f}%), largest "
            f"probability difference {self.max_probability_difference:.4f}, "
            f"{self.confident_disagreements} disagreement(s) where the reference led by >= {CONFIDENT_MARGIN}"
        )


@functools.cache
def gate_photos(resize_size: int, count: int = GATE_PHOTOS, seed: int = 0) -> tuple[bytes, ...]:
    """``count`` real photos as JPEG bodies, sized for a model resizing to ``resize_size``
    (about 10 s of one core at 224x224 models: made once per machine, read from its cache)."""
    sources = (Path(__file__), Path(examples.__file__))  # an edit to how they are made remakes them
    recipe = [resize_size, count, seed, SIDE_FACTORS, ASPECTS, SHARPNESS_MARGIN]
    recipe += [version("pillow"), version("scikit-learn"), *map(artifacts.file_digest, sources)]
    return cached_bodies("gate-photos", recipe, lambda: made_gate_photos(resize_size, count, seed))


def made_gate_photos(resize_size: int, count: int, seed: int) -> list[bytes]:
    bodies = []
    for index in range(count):
        factor = SIDE_FACTORS[index % len(SIDE_FACTORS)]
        ratio_w, ratio_h = ASPECTS[(index // len(SIDE_FACTORS)) % len(ASPECTS)]
        short = round(factor * SHARPNESS_MARGIN * resize_size)
        long = round(short * max(ratio_w, ratio_h) / min(ratio_w, ratio_h))
        width, height = (long, short) if ratio_w >= ratio_h else (short, long)
        bodies.append(examples.jpeg(examples.photo(index, width, height, seed)))
    return bodies


def probabilities(
    model: Model,
    bodies: Sequence[bytes],
    *,
    reduced: bool,
    resize_size: int,
    crop_size: int,
    mean: Sequence[float],
    std: Sequence[float],
) -> torch.Tensor:
    """The model's class probabilities for each body, decoded as a worker decodes it."""
    rows = []
    for start in range(0, len(bodies), BATCH):
        pixels = [
            raw_pixels(
                body, resize_size=resize_size, crop_size=crop_size, max_image_pixels=2**62, reduced=reduced
            )
            for body in bodies[start : start + BATCH]
        ]
        with torch.inference_mode():
            logits = model(normalize_pixels(torch.stack(pixels), mean, std))
        rows.append(torch.softmax(logits.float(), dim=1))
    return torch.cat(rows)


def compare(reference: torch.Tensor, reduced: torch.Tensor) -> GateFigures:
    """Top-1 agreement of two probability tables, their largest difference, and the
    disagreements where the reference was confident."""
    top2 = reference.topk(2, dim=1)
    leads = top2.values[:, 0] - top2.values[:, 1]
    differ = reference.argmax(dim=1) != reduced.argmax(dim=1)
    return GateFigures(
        photos=len(reference),
        agreeing=int((~differ).sum()),
        max_probability_difference=float((reference - reduced).abs().max()) if len(reference) else 0.0,
        confident_disagreements=int((differ & (leads >= CONFIDENT_MARGIN)).sum()),
    )


def measure(
    model: Model,
    *,
    resize_size: int,
    crop_size: int,
    mean: Sequence[float],
    std: Sequence[float],
    bodies: Sequence[bytes] | None = None,
) -> GateFigures:
    """The gate's figures for ``model`` on ``bodies`` (default: ``gate_photos``)."""
    photos = list(bodies) if bodies is not None else gate_photos(resize_size)
    shape = {"resize_size": resize_size, "crop_size": crop_size, "mean": mean, "std": std}
    reference = probabilities(model, photos, reduced=False, **shape)
    return compare(reference, probabilities(model, photos, reduced=True, **shape))


def report_section(figures: GateFigures) -> str:
    verdict = "PASS: `reducedDecode: auto` decodes JPEGs reduced" if figures.passed else "FAIL: `auto` is off"
    return (
        f"{HEADING}\n\n{figures.photos} real photos (JPEG q90, shorter side 2-8x twice the resize size), "
        f"reduced vs reference decoding: {figures.summary()}. Needed: >= {100 * MIN_AGREEMENT:g}% and no "
        f"confident disagreement. {verdict} (`reducedDecode: on|off` in config.properties overrides it).\n"
    )


def gate_reduced_decoding(out_dir: Path, model: Model, resolved: ResolvedWeights) -> ReducedDecodeGate:
    """Run the gate on the model being built, print it, append its section to ``out_dir``'s
    report.md (after the serving candidates'), and return the verdict the handler config records."""
    shape = {"resize_size": resolved.resize_size, "crop_size": resolved.crop_size}
    figures = measure(model, **shape, mean=resolved.mean, std=resolved.std)
    print(f"[export] reduced-size JPEG decoding: {figures.summary()}: {'PASS' if figures.passed else 'FAIL'}")
    path = out_dir / artifacts.REPORT_MARKDOWN
    text = path.read_text() if path.exists() else ""
    path.write_text(text.split(HEADING, 1)[0].rstrip() + "\n\n" + report_section(figures))
    return figures.record()
