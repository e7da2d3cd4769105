"""What the tabular worker reads from the archive's model-config.yaml (``handler:``)."""

from __future__ import annotations

from dataclasses import dataclass

from batchkit.config import ModelConfig


@dataclass(frozen=True, kw_only=True)
class TabularModelConfig(ModelConfig):
    """How a tabular classifier archive was built and must be fed: rows of ``num_features``
    numbers, in the order the model was trained on."""

    num_features: int = 4
    max_body_bytes: int = 64 * 1024
