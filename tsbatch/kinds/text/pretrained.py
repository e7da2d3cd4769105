"""Your fine-tuned text classifier: a local ``save_pretrained`` folder (``config.json`` with
``id2label``, the weights, the tokenizer files) of any architecture the installed
transformers has an ``AutoModelForSequenceClassification`` for.

Everything the build needs is read from the folder and checked before anything is built,
each problem with what to do about it: the labels (``id2label``), the architecture, the
weights (a base encoder without its fine-tuned head is refused, not given a random one),
the tokenizer and how many tokens the model takes.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from text_serving.text import load_tokenizer, pad_id, pad_to_longest, tokenize
from tsbatch.archive import artifacts
from tsbatch.kinds.text.data import TrainingError
from tsbatch.kinds.text.model import additive_mask

# The longest input a folder's own limits give, unless the entry sets max_length: workers
# warm up every padded length up to it, and a text classifier's requests are mostly short
# (longer texts are truncated, and their answers say so).
MAX_LENGTH_CAP = 128
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
# Tokenizers without a known limit say this (transformers' VERY_LARGE_INTEGER is 1e30).
UNBOUNDED_LENGTH = 1_000_000
SAVE_HINT = "save your model with model.save_pretrained(folder) and tokenizer.save_pretrained(folder)"


class PretrainedError(TrainingError):
    """The folder is not a text classifier the build can serve; the message says what to do."""


@dataclass(frozen=True)
class PretrainedFolder:
    """What a ``save_pretrained`` folder says about the classifier in it."""

    path: Path
    model_type: str  # config.json's, e.g. bert
    architecture: str  # the class it loads as, e.g. BertForSequenceClassification
    labels: list[str]  # id2label, by index
    positions: int | None  # max_position_embeddings
    tokenizer_limit: int | None  # tokenizer_config.json's model_max_length, when bounded
    pad_token_id: int | None
    files: dict[str, str]  # weight and config file -> sha256 prefix

    def describe(self) -> str:
        return f"{self.architecture} from {self.path}"


@functools.cache
def sequence_classifiers() -> dict[str, str]:
    """model_type -> the class AutoModelForSequenceClassification builds for it."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES

    return dict(MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES)


def read_json_file(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PretrainedError(f"{path} is not readable JSON ({exc}): {SAVE_HINT}") from None
    if not isinstance(document, dict):
        raise PretrainedError(f"{path} must hold a JSON object: {SAVE_HINT}")
    return document


def labels_of(config: dict[str, Any], where: Path) -> list[str]:
    """The label names of ``id2label`` in index order: every index 0..n-1 once, named."""
    id2label = config.get("id2label")
    how = (
        "set model.config.id2label = {0: 'first label', ...} (and label2id) to your label names and "
        "save the model again"
    )
    if not isinstance(id2label, dict) or len(id2label) < 2:
        raise PretrainedError(
            f"{where} has no id2label of two labels or more: the build names answers by it; {how}"
        )
    try:
        by_index = {int(index): name for index, name in id2label.items()}
    except ValueError:
        raise PretrainedError(
            f"{where}: id2label keys must be class indices, got {sorted(id2label)[:5]}"
        ) from None
    if sorted(by_index) != list(range(len(by_index))):
        raise PretrainedError(f"{where}: id2label must name every index 0..{len(by_index) - 1} once")
    labels = [by_index[index] for index in range(len(by_index))]
    if not all(isinstance(name, str) and name.strip() for name in labels) or len(set(labels)) < len(labels):
        raise PretrainedError(f"{where}: id2label names must be distinct, non-empty strings; {how}")
    if all(name == f"LABEL_{index}" for index, name in enumerate(labels)):
        print(f"[export] warning: {where} names its labels LABEL_0.. (transformers' defaults); {how}")
    return labels


def tokenizer_limit(folder: Path) -> int | None:
    """tokenizer_config.json's model_max_length, when it is a real bound."""
    path = folder / "tokenizer_config.json"
    value = read_json_file(path).get("model_max_length") if path.is_file() else None
    return int(value) if isinstance(value, int | float) and 0 < value < UNBOUNDED_LENGTH else None


def read_folder(path: Path) -> PretrainedFolder:
    """The folder's facts, or a PretrainedError naming what is missing and how to fix it."""
    if not path.is_dir():
        raise PretrainedError(
            f"weights path {path} is not a folder: give the folder that model.save_pretrained(folder) "
            "and tokenizer.save_pretrained(folder) wrote"
        )
    config_path = path / "config.json"
    if not config_path.is_file():
        raise PretrainedError(f"{path} has no config.json: {SAVE_HINT}")
    config = read_json_file(config_path)
    model_type = config.get("model_type")
    classifiers = sequence_classifiers()
    if model_type not in classifiers:
        import transformers

        raise PretrainedError(
            f"{config_path}: model_type {model_type!r} has no sequence classifier in transformers "
            f"{transformers.__version__} (it has {len(classifiers)}, e.g. bert, distilbert, roberta, albert, "
            "mpnet): export a supported architecture, or fine-tune one here (tsbatch export "
            "--model M --base-model DIR --data ...)"
        )
    files = [name for name in WEIGHT_FILES if (path / name).is_file()]
    if not files:
        raise PretrainedError(f"{path} has no weights ({' or '.join(WEIGHT_FILES[::2])}): {SAVE_HINT}")
    labels = labels_of(config, config_path)
    positions = config.get("max_position_embeddings")
    return PretrainedFolder(
        path=path,
        model_type=model_type,
        architecture=classifiers[model_type],
        labels=labels,
        positions=int(positions) if isinstance(positions, int) else None,
        tokenizer_limit=tokenizer_limit(path),
        pad_token_id=config.get("pad_token_id"),
        files={name: artifacts.file_digest(path / name) for name in ("config.json", *files)},
    )


def default_max_length(folder: PretrainedFolder) -> tuple[int, str]:
    """The smallest of the tokenizer's limit, the model's positions and MAX_LENGTH_CAP, and why."""
    limits = {
        "the tokenizer's model_max_length": folder.tokenizer_limit,
        "the model's max_position_embeddings": folder.positions,
        "the serving cap": MAX_LENGTH_CAP,
    }
    known = {why: value for why, value in limits.items() if value}
    chosen = min(known, key=lambda why: known[why])
    shown = ", ".join(f"{why} {value}" for why, value in known.items())
    return known[chosen], f"{chosen} ({shown}; set max_length to change it)"


class SequenceClassifier(torch.nn.Module):
    """A Hugging Face sequence classifier behind the signature every text worker calls:
    (input_ids, attention_mask) -> logits."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model
        # Given explicitly (zeros: one segment), the token types are not made inside the
        # model on the tracing device; models without segments do not take them.
        self.takes_token_types = "token_type_ids" in inspect.signature(model.forward).parameters

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        dtype = self.model.get_input_embeddings().weight.dtype
        types = {"token_type_ids": torch.zeros_like(input_ids)} if self.takes_token_types else {}
        return self.model(
            input_ids=input_ids, attention_mask=additive_mask(attention_mask, dtype), **types
        ).logits


def load_classifier(folder: PretrainedFolder) -> torch.nn.Module:
    """The folder's model in eval mode, with the attention that traces to plain tensor ops;
    refused when its weights lack part of the classifier (a base encoder's random head)."""
    from transformers import AutoModelForSequenceClassification

    try:
        model, info = AutoModelForSequenceClassification.from_pretrained(
            str(folder.path), attn_implementation="eager", output_loading_info=True
        )
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        raise PretrainedError(
            f"transformers cannot load {folder.path} as {folder.architecture} ({type(exc).__name__}: {first})"
        ) from None
    missing = list(info.get("missing_keys") or [])
    if missing:
        raise PretrainedError(
            f"{folder.path}'s weights lack {len(missing)} {folder.architecture} parameters ({', '.join(missing[:3])}): "
            "a base encoder without its fine-tuned classification head? Save the fine-tuned model, or "
            f"fine-tune one here (tsbatch export --model M --base-model {folder.path} --data ...)"
        )
    return model.eval()


def check_inputs(
    model: torch.nn.Module, folder: PretrainedFolder, tokenizer_dir: Path, max_length: int
) -> None:
    """The tokenizer pads with the model's pad id, and the model takes ``max_length`` tokens
    and answers one score per label."""
    tokenizer = load_tokenizer(tokenizer_dir, max_length)
    padding = pad_id(tokenizer)
    if folder.pad_token_id is not None and padding != folder.pad_token_id:
        raise PretrainedError(
            f"the tokenizer pads with id {padding} but config.json's pad_token_id is {folder.pad_token_id}: "
            "save the tokenizer the model was fine-tuned with into the folder"
        )
    ids = torch.full((1, max_length), tokenize(tokenizer, ["a"]).ids[0][0], dtype=torch.long)
    try:
        with torch.inference_mode():
            logits = SequenceClassifier(model)(ids, torch.ones_like(ids))
    except Exception as exc:
        raise PretrainedError(
            f"{folder.architecture} cannot take {max_length} tokens ({type(exc).__name__}: "
            f"{str(exc)[:200]}): set max_length lower (its tokenizer's model_max_length)"
        ) from None
    if tuple(logits.shape) != (1, len(folder.labels)):
        raise PretrainedError(
            f"{folder.architecture} answers {tuple(logits.shape)} for one text, not one score per each of "
            f"the {len(folder.labels)} labels of id2label: make num_labels and id2label agree"
        )


def hugging_face_difference(
    traced: torch.jit.ScriptModule,
    model: torch.nn.Module,
    tokenizer_dir: Path,
    texts: Sequence[str],
    max_length: int,
) -> float:
    """Largest logit difference of the TorchScript vs the model called as its user calls it
    (``model(input_ids=..., attention_mask=...).logits``), on real texts in one padded batch."""
    tokenizer = load_tokenizer(tokenizer_dir, max_length)
    ids, mask = pad_to_longest(tokenize(tokenizer, texts).ids, pad_id(tokenizer))
    with torch.inference_mode():
        expected = model(input_ids=ids, attention_mask=mask).logits
        return float((traced(ids, mask) - expected).abs().max())
