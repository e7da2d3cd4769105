"""The text classifier's typed handler config, read from the archive's model-config.yaml
(``batchkit.config.from_mapping``): its tokenizer, lengths and out-of-scope threshold."""

from __future__ import annotations

from dataclasses import dataclass

from batchkit.config import ModelConfig


@dataclass(frozen=True, kw_only=True)
class TextModelConfig(ModelConfig):
    """How a text classifier archive was built and must be fed."""

    tokenizer_dir: str
    base_model: str
    max_length: int = 64
    oos_threshold: float
    oos_label: str = "oos"
    token_budget: int = 4096
    # The fixed cost of one forward pass, in tokens: a batch whose lengths differ by more
    # than this is split into length-sorted passes (0 = never split, only the budget).
    pass_overhead_tokens: int = 0
    max_body_bytes: int = 64 * 1024
    # Padded lengths round up to this multiple (text_serving.text.pad_to_longest): a bounded
    # set of shapes, all warmed up at load, so memory stays flat under any mix of lengths.
    pad_to_multiple_of: int = 8
