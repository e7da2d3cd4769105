"""TorchServe handler for the image classifier, any torchvision architecture (one class, as
TorchServe requires). Named ``*_handler`` because TorchServe resolves a bare ``image_classifier``
to its stock handler only when no installed module has that name."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from batchkit.errors import RequestError
from batchkit.handler_base import BatchHandler
from batchkit.loader import load_served_model
from image_serving.config import ImageModelConfig
from image_serving.decode import ImageDecoder, image_decoder
from image_serving.images import IMAGE_INPUTS, check_images, model_batch


class ImageClassifierHandler(BatchHandler[ImageModelConfig]):
    """Decode and validate each image to uint8 pixels (a batch at once, on the worker's
    decode pool and path, each image failing alone); normalize and classify the valid
    ones in one forward pass."""

    decoder: ImageDecoder

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
        self.decoder = image_decoder(config, self.device)

    def decode_batch(self, values: Sequence[Any]) -> list[torch.Tensor | RequestError]:
        return self.decoder.decode_batch(values)

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

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "decode_path": self.decoder.path,
            "decode_threads": self.decoder.pool.threads,
            "decode_cores": self.decoder.pool.limit,
            # Batches decoded per thread count, e.g. {"1": 40, "2": 12}: what auto chose.
            "decode_batches_by_threads": {
                str(k): v for k, v in sorted(self.decoder.batches_by_threads.items())
            },
            "reduced_decode": self.decoder.reduced,
        }

    def warmup_items(self, count: int) -> list[torch.Tensor]:
        size = self.config.crop_size
        return [torch.zeros(3, size, size, dtype=torch.uint8) for _ in range(count)]
