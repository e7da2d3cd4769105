"""TorchServe handler for any BERT-family sequence classifier the text kind builds (one class, as
TorchServe requires). Named ``*_handler`` because TorchServe resolves a bare ``text_classifier``
to its stock handler only when no installed module has that name."""

from __future__ import annotations

import logging
import time
from typing import Any

import torch

from batchkit.handler_base import BatchHandler
from batchkit.loader import load_served_model
from batchkit.metrics import BatchReport
from text_serving.config import TextModelConfig
from text_serving.text import (
    TEXT_INPUTS,
    TextScores,
    check_tokens,
    length_buckets,
    load_tokenizer,
    pad_id,
    pad_to_longest,
    padding_of,
    plan_groups,
    text_from_body,
    tokenize,
)

logger = logging.getLogger(__name__)

WARMUP_TEXT = "how long until my replacement card arrives in the mail after i reported it lost"


class TextClassifierHandler(BatchHandler[TextModelConfig]):
    """Validate each text alone, tokenize the batch in one call, run length-grouped passes."""

    config_type = TextModelConfig
    input_schema = TEXT_INPUTS

    def load(self) -> None:
        config = self.config
        self.tokenizer = load_tokenizer(self.model_dir / config.tokenizer_dir, config.max_length)
        self.pad_token_id = pad_id(self.tokenizer)
        self.model = load_served_model(
            config,
            self.model_dir,
            self.device,
            self.max_batch_size,
            check_tokens(self.tokenizer),
        )

    def decode(self, body: Any) -> str:
        return text_from_body(body, self.config.max_body_bytes)

    def infer(self, texts: list[str]) -> list[TextScores]:
        config = self.config
        tokenized = tokenize(self.tokenizer, texts)
        lengths = tokenized.lengths
        groups = plan_groups(lengths, config.token_budget, None, config.pass_overhead_tokens)
        scores: dict[int, TextScores] = {}
        for forward_pass, group in enumerate(groups):
            input_ids, attention_mask = pad_to_longest(
                [tokenized.ids[i] for i in group],
                self.pad_token_id,
                config.pad_to_multiple_of,
                config.max_length,
            )
            logits = self.model(input_ids.to(self.device), attention_mask.to(self.device))
            rows = torch.softmax(logits.float(), dim=1).cpu().tolist()
            for index, row in zip(group, rows, strict=True):
                scores[index] = TextScores(
                    probabilities=row,
                    truncated=tokenized.truncated[index],
                    tokens=lengths[index],
                    padded_length=input_ids.shape[1],
                    forward_pass=forward_pass,
                )
        return [scores[index] for index in range(len(texts))]

    def encode(self, output: TextScores) -> dict[str, Any]:
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

    def annotate(self, report: BatchReport, outputs: list[TextScores]) -> None:
        """Padding efficiency of this batch's forward passes (none when nothing ran)."""
        if outputs:
            report.padding = padding_of(outputs)

    def warmup_shapes(self) -> list[tuple[int, int]]:
        """Every (batch size, padded length) a batch can have: what warm-up runs."""
        buckets = length_buckets(self.config.max_length, self.config.pad_to_multiple_of)
        return [(size, length) for size in range(1, self.max_batch_size + 1) for length in buckets]

    def warm_up(self) -> None:
        """Also run every shape of :meth:`warmup_shapes` once, so no request meets a
        cold shape and the worker's memory is what it will stay."""
        super().warm_up()
        started = time.perf_counter()
        shapes = self.warmup_shapes()
        with torch.inference_mode():
            for shape in shapes:
                ids = torch.full(shape, self.pad_token_id, dtype=torch.long, device=self.device)
                self.model(ids, torch.ones_like(ids))
        logger.info("warm-up of %d shapes took %.1f s", len(shapes), time.perf_counter() - started)

    def warmup_items(self, count: int) -> list[str]:
        """Texts of spread-out lengths, so warm-up runs more than one shape."""
        words = WARMUP_TEXT.split()
        return [" ".join(words[: 1 + (i * 4) % len(words)]) for i in range(count)]
