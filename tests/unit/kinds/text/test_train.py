"""Training options, length-bucketed batches, the optimizer's parameter groups, and one
real fine-tuning epoch on a tiny BERT."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError

from tests.conftest import tiny_encoder
from tsbatch.kinds.text.data import TrainingError, load_data
from tsbatch.kinds.text.model import IntentClassifier
from tsbatch.kinds.text.train import (
    TrainingOptions,
    build_optimizer,
    class_weights,
    freeze_lower_layers,
    length_bucketed_batches,
    train,
)


def test_training_options_reject_unknown_settings() -> None:
    options = TrainingOptions.model_validate({"epochs": 2, "seed": 3, "gates": {}})
    assert (options.epochs, options.seed) == (2, 3)
    with pytest.raises(ValidationError, match="epoch"):
        TrainingOptions.model_validate({"epoch": 2})


def test_batches_cover_every_example_once_and_group_similar_lengths() -> None:
    lengths = [random.Random(i).randrange(1, 60) for i in range(1000)]
    batches = length_bucketed_batches(lengths, 8, random.Random(0))
    assert sorted(index for batch in batches for index in batch) == list(range(1000))
    assert all(len(batch) <= 8 for batch in batches)
    spreads = [max(lengths[i] for i in batch) - min(lengths[i] for i in batch) for batch in batches]
    assert sum(spreads) / len(spreads) < 15  # random batches of 8 would spread about 45


def test_optimizer_gives_the_head_its_rate_and_skips_frozen_embeddings() -> None:
    torch.manual_seed(0)
    model = IntentClassifier(tiny_encoder(), 3)
    embeddings = model.encoder.get_input_embeddings().weight.requires_grad_(False)
    options = TrainingOptions(learning_rate=1e-4, head_learning_rate=1e-3, weight_decay=0.01)
    decay, no_decay, head = build_optimizer(model, options).param_groups
    assert [id(p) for p in head["params"]] == [id(p) for p in model.head.parameters()]
    assert (head["lr"], decay["lr"], no_decay["lr"]) == (1e-3, 1e-4, 1e-4)
    assert (decay["weight_decay"], no_decay["weight_decay"]) == (0.01, 0.0)
    assert all(parameter.ndim < 2 for parameter in no_decay["params"])
    grouped = [id(p) for group in (decay, no_decay, head) for p in group["params"]]
    assert id(embeddings) not in grouped and len(grouped) == len(set(grouped))


def test_frozen_layers_leave_the_optimizer_and_refuse_more_than_the_encoder_has() -> None:
    torch.manual_seed(0)
    model = IntentClassifier(tiny_encoder(), 3)
    freeze_lower_layers(model, 1)
    first, second = model.encoder.encoder.layer
    assert not any(p.requires_grad for p in (*model.encoder.embeddings.parameters(), *first.parameters()))
    assert all(p.requires_grad for p in second.parameters())
    grouped = {
        id(p) for group in build_optimizer(model, TrainingOptions()).param_groups for p in group["params"]
    }
    assert not grouped & {id(p) for p in first.parameters()}
    with pytest.raises(TrainingError, match="exceeds"):
        freeze_lower_layers(model, 3)


def test_class_weights_shrink_a_large_class_and_keep_the_average_example_at_one() -> None:
    targets = [0] * 400 + [1] * 100 + [2] * 100
    weights = class_weights(targets, 3)
    assert torch.isclose(weights[1] / weights[0], torch.tensor(2.0))
    assert torch.isclose(weights[torch.as_tensor(targets)].mean(), torch.tensor(1.0))


def test_train_fine_tunes_a_tiny_base_model_and_saves_its_tokenizer(
    tmp_path: Path, tiny_base_model: Path, tiny_clinc: Path
) -> None:
    data = load_data("clinc150", data=tiny_clinc)
    options = TrainingOptions(epochs=1, threads=1, frozen_layers=1, balance_classes=True)
    trained = train(data, str(tiny_base_model), tmp_path, 32, options)
    assert trained.cpu_seconds > 0
    assert trained.labels == ["balance", "transfer", "oos"]
    assert [entry["epoch"] for entry in trained.history] == [1] and trained.history[0]["loss"] > 0
    assert not trained.model.training
    assert trained.tokenizer_dir == tmp_path / "tokenizer"
    assert (trained.tokenizer_dir / "tokenizer.json").exists()
