"""Realistic request bodies, built once per load-generator process.

Images for resnet18 are drawn with PIL at start (nothing is downloaded): digit-like
drawings (dark strokes on a light background, like the digits the default model knows)
and photo-like pictures (smooth colour gradients, blurred noise, shapes), long sides from
32 to 1024 px with varied aspect ratios, as PNG, JPEG and WebP. Decode and resize cost on
the server grows with size and differs per format, which a single fixed test image hides.

Utterances for bert_intent come from the project's own held-out split
(data/intents/test.csv, falling back to data/intents/raw/*.csv), mostly as text/plain and
some as JSON ``{"text": ...}``; a few are several utterances joined, longer than the
model's max_length, so truncation is on the tested path too.
"""

from __future__ import annotations

import csv
import io
import json
import random
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter, ImageFont

from tsbatch.paths import INTENT_DATA_DIR

INTENT_TEST_CSV = INTENT_DATA_DIR / "test.csv"
INTENT_RAW_DIR = INTENT_DATA_DIR / "raw"

IMAGE_SIDES = (32, 48, 64, 96, 128, 160, 224, 256, 320, 384, 480, 512, 640, 800, 1024)
IMAGE_FORMATS = (("PNG", "image/png"), ("JPEG", "image/jpeg"), ("WEBP", "image/webp"))


@dataclass(frozen=True)
class Payload:
    body: bytes
    content_type: str
    description: str  # e.g. "digit 96x64 PNG": shown in failure messages


# ---------------------------------------------------------------- images
def _digit_image(rng: random.Random, width: int, height: int) -> Image.Image:
    background = rng.randint(200, 255)
    image = Image.new("L", (width, height), background)
    draw = ImageDraw.Draw(image)
    side = min(width, height)
    font = ImageFont.load_default(size=max(8, int(side * rng.uniform(0.6, 0.9))))
    digit = str(rng.randint(0, 9))
    left, top, right, bottom = draw.textbbox((0, 0), digit, font=font)
    x = (width - (right - left)) / 2 - left + rng.uniform(-0.05, 0.05) * width
    y = (height - (bottom - top)) / 2 - top + rng.uniform(-0.05, 0.05) * height
    draw.text((x, y), digit, fill=rng.randint(0, 60), font=font, stroke_width=max(1, side // 40))
    image = image.rotate(rng.uniform(-15, 15), fillcolor=background)
    if rng.random() < 0.5:
        image = image.filter(ImageFilter.GaussianBlur(radius=side / 200))
    return image.convert("RGB")


def _photo_image(rng: random.Random, width: int, height: int) -> Image.Image:
    channels = []
    for _ in range(3):
        gradient = Image.linear_gradient("L").rotate(rng.uniform(0, 360)).resize((width, height))
        noise = Image.frombytes(
            "L", (width, height), rng.randbytes(width * height)
        )  # seeded, unlike effect_noise
        channels.append(Image.blend(gradient, noise, rng.uniform(0.1, 0.3)))
    image = Image.merge("RGB", channels)
    draw = ImageDraw.Draw(image)
    for _ in range(rng.randint(2, 6)):
        x0, y0 = rng.uniform(0, width), rng.uniform(0, height)
        x1, y1 = x0 + rng.uniform(0.1, 0.5) * width, y0 + rng.uniform(0.1, 0.5) * height
        draw.ellipse((x0, y0, x1, y1), fill=tuple(rng.randint(0, 255) for _ in range(3)))
    return image.filter(ImageFilter.GaussianBlur(radius=max(0.5, min(width, height) / 300)))


def _encode(image: Image.Image, fmt: str, rng: random.Random) -> bytes:
    buffer = io.BytesIO()
    if fmt in ("JPEG", "WEBP"):
        image.save(buffer, fmt, quality=rng.randint(70, 95))
    else:
        image.save(buffer, fmt, optimize=False)
    return buffer.getvalue()


def image_pool(seed: int = 0, sides: tuple[int, ...] = IMAGE_SIDES) -> list[Payload]:
    """One digit drawing and one photo-like image per long side, formats rotating."""
    rng = random.Random(seed)
    pool = []
    for index, side in enumerate(sides):
        for kind_index, kind in enumerate(("digit", "photo")):
            aspect = rng.uniform(0.6, 1.6) if side > 32 else 1.0
            width, height = (
                (side, max(16, round(side / aspect)))
                if aspect >= 1
                else (max(16, round(side * aspect)), side)
            )
            image = _digit_image(rng, width, height) if kind == "digit" else _photo_image(rng, width, height)
            fmt, content_type = IMAGE_FORMATS[(index + kind_index) % len(IMAGE_FORMATS)]
            pool.append(Payload(_encode(image, fmt, rng), content_type, f"{kind} {width}x{height} {fmt}"))
    return pool


# ---------------------------------------------------------------- utterances
def read_utterances(test_csv: Path = INTENT_TEST_CSV, raw_dir: Path = INTENT_RAW_DIR) -> list[str]:
    """The ``text`` column of the held-out split, or of the raw files while it does not exist."""
    sources = [test_csv] if test_csv.exists() else sorted(raw_dir.glob("*.csv"))
    texts = []
    for path in sources:
        with path.open(newline="", encoding="utf-8") as handle:
            texts.extend(
                row["text"].strip() for row in csv.DictReader(handle) if (row.get("text") or "").strip()
            )
    if not texts:
        raise FileNotFoundError(f"no utterances found in {test_csv} or {raw_dir}/*.csv")
    return texts


def text_pool(
    texts: list[str], seed: int = 0, json_share: float = 0.2, long_share: float = 0.05
) -> list[Payload]:
    """Every utterance once (text/plain or JSON), plus joined ones longer than the model's max_length."""
    rng = random.Random(seed)
    pool = []
    for text in texts:
        if rng.random() < json_share:
            pool.append(
                Payload(json.dumps({"text": text}).encode(), "application/json", f"json {len(text)} chars")
            )
        else:
            pool.append(Payload(text.encode("utf-8"), "text/plain; charset=utf-8", f"text {len(text)} chars"))
    for _ in range(max(1, round(len(texts) * long_share))):
        joined = ". ".join(rng.sample(texts, k=min(len(texts), rng.randint(6, 12))))
        pool.append(
            Payload(joined.encode("utf-8"), "text/plain; charset=utf-8", f"long text {len(joined)} chars")
        )
    rng.shuffle(pool)
    return pool
