"""TorchServe handler of the tabular kind: rows of numbers in, the classes ranked out (one
class, as TorchServe requires)."""

from __future__ import annotations

from typing import Any

import torch

from batchkit.handler_base import BatchHandler
from batchkit.worker import load_torchscript
from tabular_serving.config import TabularModelConfig
from tabular_serving.features import TABULAR_INPUTS, features_from_body


class TabularClassifierHandler(BatchHandler[TabularModelConfig]):
    """Validate each row alone, run the batch's rows in one pass."""

    config_type = TabularModelConfig
    input_schema = TABULAR_INPUTS

    def load(self) -> None:
        self.model = load_torchscript(self.model_dir / self.config.model_file, self.device)

    def decode(self, body: Any) -> torch.Tensor:
        return features_from_body(body, self.config.num_features, self.config.max_body_bytes)

    def infer(self, rows: list[torch.Tensor]) -> list[tuple[list[float], list[int]]]:
        logits = self.model(torch.stack(rows).to(self.device))
        values, indices = torch.softmax(logits.float(), dim=1).topk(self.top_k, dim=1)
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
        return [torch.zeros(self.config.num_features) for _ in range(count)]
