"""A kind writes its archive's handler config through the worker's own config type."""

from __future__ import annotations

import pytest

from batchkit.config import TextModelConfig, from_mapping
from tsbatch.archive.manifest import load_manifest
from tsbatch.kinds.image.kind import IMAGE
from tsbatch.kinds.text.kind import TEXT

RESOLVED = {"tokenizer_dir": "tokenizer", "base_model": "base", "oos_threshold": 0.4}


def test_the_handler_config_carries_the_manifest_and_what_export_found() -> None:
    spec = load_manifest().model("bert_intent")
    values = TEXT.handler_config(spec.name, spec.config, RESOLVED)
    assert "torch_threads" not in values  # packaging's
    config = from_mapping(TextModelConfig, {**values, "torch_threads": 1})
    assert (config.model_name, config.oos_threshold, config.pass_overhead_tokens) == ("bert_intent", 0.4, 16)
    assert isinstance(values["warmup_batch_sizes"], list)  # plain YAML


def test_an_unknown_or_missing_field_fails_the_build() -> None:
    spec = load_manifest().model("bert_intent")
    with pytest.raises(ValueError, match=r"unknown keys \['oos_treshold'\]"):
        TEXT.handler_config(spec.name, spec.config, {**RESOLVED, "oos_treshold": 0.4})
    with pytest.raises(ValueError, match=r"missing keys \['crop_size'"):
        IMAGE.handler_config("resnet18", load_manifest().model("resnet18").config, {"weights": "w"})
