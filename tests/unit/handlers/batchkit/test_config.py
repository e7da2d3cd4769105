"""Per-model handler configs read from model-config.yaml (batchkit/config.py)."""

from __future__ import annotations

import pytest

from batchkit.config import ModelConfig, from_mapping, to_mapping
from image_serving.config import ImageModelConfig
from text_serving.config import TextModelConfig

TEXT = {
    "model_name": "intent",
    "model_file": "model.pt",
    "labels_file": "labels.json",
    "tokenizer_dir": "tokenizer",
    "base_model": "tiny",
    "max_length": 16,
    "oos_threshold": 0.5,
}


def test_every_model_config_has_the_fields_every_handler_reads() -> None:
    assert issubclass(ImageModelConfig, ModelConfig) and issubclass(TextModelConfig, ModelConfig)
    config = from_mapping(TextModelConfig, TEXT)
    assert (config.model_name, config.top_k, config.torch_threads, config.warmup_batch_sizes) == (
        "intent",
        5,
        1,
        (1,),
    )
    assert config.max_body_bytes == 64 * 1024
    assert ImageModelConfig.max_body_bytes == 16 * 1024 * 1024


def test_lists_become_tuples_and_back() -> None:
    config = from_mapping(TextModelConfig, {**TEXT, "warmup_batch_sizes": [1, 8]})
    assert config.warmup_batch_sizes == (1, 8)
    values = to_mapping(config)
    assert values["warmup_batch_sizes"] == [1, 8]
    assert from_mapping(TextModelConfig, values) == config


def test_unknown_and_missing_keys_are_refused() -> None:
    with pytest.raises(ValueError, match=r"TextModelConfig: unknown keys \['max_lenght'\]"):
        from_mapping(TextModelConfig, {**TEXT, "max_lenght": 8})
    without_name = {key: value for key, value in TEXT.items() if key != "model_name"}
    with pytest.raises(ValueError, match=r"TextModelConfig: missing keys \['model_name'\]"):
        from_mapping(TextModelConfig, without_name)
