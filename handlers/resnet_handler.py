"""TorchServe handler for the ResNet image classifier (one class, as TorchServe requires)."""

from __future__ import annotations

from typing import Any

import torch

from batchkit.config import ImageModelConfig
from batchkit.handler_base import BatchHandler
from batchkit.images import IMAGE_INPUTS, check_images, decode_pixels, model_batch
from batchkit.loader import load_served_model


class ResNetClassifierHandler(BatchHandler[ImageModelConfig]):
    """Decode and validate each image alone to uint8 pixels; normalize and classify the
    valid ones in one forward pass."""

    config_type = ImageModelConfig
    input_schema = IMAGE_INPUTS

    def load(self) -> None:
        config = self.config
        self.model = load_served_model(
            config,
            self.model_dir,
            self.device,
            self.max_batch_size,
            (check_images(config.crop_size),),
            optimize=config.optimize,
        )

    def decode(self, body: Any) -> torch.Tensor:
        config = self.config
        return decode_pixels(
            body,
            resize_size=config.resize_size,
            crop_size=config.crop_size,
            max_image_pixels=config.max_image_pixels,
            max_body_bytes=config.max_body_bytes,
        )

    def infer(self, items: list[torch.Tensor]) -> list[tuple[list[float], list[int]]]:
        batch = model_batch(items, self.config.mean, self.config.std, self.device)
        probabilities = torch.softmax(self.model(batch).float(), dim=1)
        values, indices = probabilities.topk(self.top_k, dim=1)
        return list(zip(values.cpu().tolist(), indices.cpu().tolist(), strict=True))

    def encode(self, output: tuple[list[float], list[int]]) -> dict[str, Any]:
        values, indices = output
        return {
            "model": self.config.model_name,
            "predictions": [
                {"label": self.labels[index], "index": index, "probability": round(value, 6)}
                for value, index in zip(values, indices, strict=True)
            ],
        }

    def warmup_items(self, count: int) -> list[torch.Tensor]:
        size = self.config.crop_size
        return [torch.zeros(3, size, size, dtype=torch.uint8) for _ in range(count)]
