"""The intent classifier served "the usual way", as the benchmark's baseline.

This is the recipe most TorchServe text handlers follow: TorchServe's ``BaseHandler``
loads the TorchScript model, and each request is tokenized on its own with a Hugging Face
tokenizer, padded to a fixed 128 tokens, then the rows are stacked into one batch. It is
deliberately not optimised; it runs the same ``model.pt``, tokenizer and labels as the
toolkit's handler, with the same torch thread count, so that only the batching differs.
"""

from __future__ import annotations

import json
import os
from typing import Any

import torch
from transformers import AutoTokenizer
from ts.torch_handler.base_handler import BaseHandler

FIXED_LENGTH = 128


class UsualWayTextHandler(BaseHandler):
    """Per-request tokenization padded to 128 tokens; one forward pass per batch."""

    def initialize(self, context: Any) -> None:
        handler_config = (context.model_yaml_config or {}).get("handler", {})
        torch.set_num_threads(int(handler_config.get("torch_threads", 1)))
        super().initialize(context)
        model_dir = context.system_properties["model_dir"]
        self.tokenizer = AutoTokenizer.from_pretrained(
            os.path.join(model_dir, handler_config.get("tokenizer_dir", "tokenizer"))
        )
        with open(os.path.join(model_dir, handler_config.get("labels_file", "labels.json"))) as handle:
            self.labels = json.load(handle)
        self.oos_threshold = float(handler_config.get("oos_threshold", 0.0))

    def preprocess(self, data: list[dict[str, Any]]) -> tuple[torch.Tensor, torch.Tensor]:
        ids, masks = [], []
        for request in data:
            body = request.get("data") or request.get("body")
            if isinstance(body, bytes | bytearray):
                body = body.decode("utf-8")
            if isinstance(body, dict):
                body = body["text"]
            encoded = self.tokenizer(
                body, padding="max_length", truncation=True, max_length=FIXED_LENGTH, return_tensors="pt"
            )
            ids.append(encoded["input_ids"])
            masks.append(encoded["attention_mask"])
        return torch.cat(ids), torch.cat(masks)

    def inference(self, data: tuple[torch.Tensor, torch.Tensor], *args: Any, **kwargs: Any) -> torch.Tensor:
        input_ids, attention_mask = data
        with torch.inference_mode():
            return self.model(input_ids.to(self.device), attention_mask.to(self.device))

    def postprocess(self, data: torch.Tensor) -> list[dict[str, Any]]:
        probabilities = torch.softmax(data.float(), dim=1)
        confidence, index = probabilities.max(dim=1)
        results = []
        for value, position in zip(confidence.tolist(), index.tolist(), strict=True):
            label = self.labels[position]
            in_scope = label != "oos" and value >= self.oos_threshold
            results.append({"intent": label if in_scope else "oos", "confidence": round(value, 6)})
        return results
