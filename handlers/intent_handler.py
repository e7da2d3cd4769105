"""TorchServe handler for the BERT intent classifier (one class, as TorchServe requires)."""

from __future__ import annotations

import json
from typing import Any

import torch

from batchkit.config import TextModelConfig
from batchkit.handler_base import BatchHandler
from batchkit.metrics import BatchReport
from batchkit.text import (
    IntentScores,
    PaddingStats,
    load_tokenizer,
    pad_id,
    pad_to_longest,
    plan_groups,
    text_from_body,
    tokenize,
)

WARMUP_TEXT = "how long until my replacement card arrives in the mail after i reported it lost"


class IntentClassifierHandler(BatchHandler[TextModelConfig]):
    """Validate each text alone, tokenize the batch in one call, run length-grouped passes."""

    config_type = TextModelConfig

    def load(self) -> None:
        config = self.config
        self.model = torch.jit.load(str(self.model_dir / config.model_file), map_location=self.device)
        self.model.eval()
        self.labels: list[str] = json.loads((self.model_dir / config.labels_file).read_text())
        self.tokenizer = load_tokenizer(self.model_dir / config.tokenizer_dir, config.max_length)
        self.pad_token_id = pad_id(self.tokenizer)
        self.top_k = min(config.top_k, len(self.labels))
        self.padding = PaddingStats()

    def decode(self, body: Any) -> str:
        return text_from_body(body, self.config.max_body_bytes)

    def infer(self, texts: list[str]) -> list[IntentScores]:
        config = self.config
        tokenized = tokenize(self.tokenizer, texts)
        lengths = tokenized.lengths
        groups = plan_groups(lengths, config.token_budget, None, config.pass_overhead_tokens)
        probabilities: list[list[float]] = [[] for _ in texts]
        stats = PaddingStats()
        for group in groups:
            input_ids, attention_mask = pad_to_longest([tokenized.ids[i] for i in group], self.pad_token_id)
            logits = self.model(input_ids.to(self.device), attention_mask.to(self.device))
            rows = torch.softmax(logits.float(), dim=1).cpu().tolist()
            for index, row in zip(group, rows, strict=True):
                probabilities[index] = row
            stats.add([lengths[i] for i in group])
        self.padding = stats
        return [IntentScores(row, cut) for row, cut in zip(probabilities, tokenized.truncated, strict=True)]

    def encode(self, output: IntentScores) -> dict[str, Any]:
        config = self.config
        probabilities = torch.tensor(output.probabilities)
        values, indices = probabilities.topk(self.top_k)
        best, confidence = self.labels[int(indices[0])], float(values[0])
        in_scope = best != config.oos_label and confidence >= config.oos_threshold
        return {
            "model": config.model_name,
            "intent": best if in_scope else config.oos_label,
            "confidence": round(confidence, 6),
            "in_scope": in_scope,
            "top_k": [
                {"intent": self.labels[int(index)], "probability": round(float(value), 6)}
                for value, index in zip(values, indices, strict=True)
            ],
            "truncated": output.truncated,
        }

    def annotate(self, report: BatchReport) -> None:
        """Padding efficiency of this batch's forward passes (none when nothing ran)."""
        if self.padding.forward_passes:
            report.real_tokens = self.padding.real_tokens
            report.padded_tokens = self.padding.padded_tokens
            report.extra["forward_passes"] = float(self.padding.forward_passes)
        self.padding = PaddingStats()

    def warm_up(self) -> None:
        super().warm_up()
        self.padding = PaddingStats()  # warm-up passes are not a served batch

    def warmup_items(self, count: int) -> list[str]:
        """Texts of spread-out lengths, so warm-up runs more than one shape."""
        words = WARMUP_TEXT.split()
        return [" ".join(words[: 1 + (i * 4) % len(words)]) for i in range(count)]
