"""Fine-tune the encoder and the head end to end on the training split.

Training sees exactly the token ids the handler will send (the same ``text_serving.text``
functions), with light typo and punctuation noise (``noise``) so that real users'
spelling does not surprise it.
"""

from __future__ import annotations

import math
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from text_serving.text import load_tokenizer, pad_id, pad_to_longest, tokenize
from tsbatch.kinds.text.data import IntentData, TrainingError, check_data
from tsbatch.kinds.text.model import TOKENIZER_DIR, IntentClassifier, load_encoder, save_tokenizer
from tsbatch.kinds.text.noise import add_noise
from tsbatch.kinds.text.schema import OOS_LABEL, TrainingOptions


@dataclass
class TrainedModel:
    model: IntentClassifier
    labels: list[str]
    tokenizer_dir: Path
    history: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # all threads: comparable on a shared machine where wall time is not


def length_bucketed_batches(
    lengths: Sequence[int], batch_size: int, rng: random.Random, pool: int = 8
) -> list[list[int]]:
    """Shuffled batches of similar lengths: less padding, so training takes about half the time.

    The shuffled indices are cut into pools of ``pool`` batches, each pool is sorted by
    length and cut into batches, and the batch order is shuffled again.
    """
    order = list(range(len(lengths)))
    rng.shuffle(order)
    batches: list[list[int]] = []
    span = batch_size * pool
    for start in range(0, len(order), span):
        chunk = sorted(order[start : start + span], key=lambda i: lengths[i])
        batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    return batches


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def class_weights(label_ids: Sequence[int], num_labels: int) -> torch.Tensor:
    """1/sqrt(count) per class, scaled so that an average example weighs 1."""
    counts = torch.bincount(torch.as_tensor(label_ids), minlength=num_labels).float().clamp(min=1)
    weights = counts.rsqrt()
    return weights * len(label_ids) / float((weights * counts).sum())


def freeze_lower_layers(model: IntentClassifier, count: int) -> None:
    """Stop gradients into the embeddings and the first ``count`` encoder layers."""
    if count <= 0:
        return
    layers = model.encoder.encoder.layer
    if count > len(layers):
        raise TrainingError(f"frozen_layers {count} exceeds the encoder's {len(layers)} layers")
    for module in (model.encoder.embeddings, *layers[:count]):
        module.requires_grad_(False)


def build_optimizer(model: IntentClassifier, options: TrainingOptions) -> torch.optim.AdamW:
    """AdamW with the head on its own (higher) learning rate, and no weight decay on
    biases and LayerNorm weights."""
    head_params = list(model.head.parameters())
    head_ids = {id(p) for p in head_params}
    decay, no_decay = [], []
    for name, parameter in model.encoder.named_parameters():
        if id(parameter) in head_ids or not parameter.requires_grad:
            continue
        (no_decay if parameter.ndim < 2 or "LayerNorm" in name else decay).append(parameter)
    return torch.optim.AdamW(
        [
            {"params": decay, "lr": options.learning_rate, "weight_decay": options.weight_decay},
            {"params": no_decay, "lr": options.learning_rate, "weight_decay": 0.0},
            {"params": head_params, "lr": options.head_learning_rate, "weight_decay": options.weight_decay},
        ]
    )


def warmup_then_linear_decay(
    optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    def schedule(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)


def train(
    data: IntentData,
    base_model: str,
    out_dir: Path,
    max_length: int,
    options: TrainingOptions,
    oos_label: str = OOS_LABEL,
) -> TrainedModel:
    """Fine-tune encoder and head end to end; returns the model in eval mode."""
    check_data(data, oos_label)
    if options.threads:
        torch.set_num_threads(options.threads)
    seed_everything(options.seed)
    labels = data.labels(oos_label)
    label_index = {label: i for i, label in enumerate(labels)}
    tokenizer_dir = save_tokenizer(base_model, out_dir / TOKENIZER_DIR, max_length)
    tokenizer = load_tokenizer(tokenizer_dir, max_length)
    padding = pad_id(tokenizer)
    model = IntentClassifier(load_encoder(base_model), len(labels), options.dropout)
    if options.freeze_word_embeddings:
        # Words the training set never shows (synonyms, typos) keep their pretrained
        # vectors, and the optimizer skips the largest matrix of the model.
        model.encoder.get_input_embeddings().weight.requires_grad_(False)
    freeze_lower_layers(model, options.frozen_layers)
    optimizer = build_optimizer(model, options)
    total_steps = options.epochs * math.ceil(len(data.train) / options.batch_size)
    scheduler = warmup_then_linear_decay(
        optimizer, max(1, int(options.warmup_fraction * total_steps)), total_steps
    )
    rng = random.Random(options.seed)
    train_label_ids = [label_index[label] for _, label in data.train]
    loss_function = torch.nn.CrossEntropyLoss(
        weight=class_weights(train_label_ids, len(labels)) if options.balance_classes else None,
        label_smoothing=options.label_smoothing,
    )
    history: list[dict[str, float]] = []
    started, cpu_started = time.perf_counter(), time.process_time()
    progress = tqdm(
        total=total_steps, desc="[train] fine-tuning", unit="step", file=sys.stdout, mininterval=2
    )
    for epoch in range(options.epochs):
        model.train()
        noisy = [add_noise(text, rng, options.noise_probability) for text, _ in data.train]
        token_ids = tokenize(tokenizer, noisy).ids
        epoch_loss, seen = 0.0, 0
        for batch in length_bucketed_batches([len(ids) for ids in token_ids], options.batch_size, rng):
            input_ids, attention_mask = pad_to_longest([token_ids[i] for i in batch], padding)
            batch_labels = torch.as_tensor([train_label_ids[i] for i in batch])
            loss = loss_function(model(input_ids, attention_mask), batch_labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            epoch_loss += float(loss.detach()) * len(batch)
            seen += len(batch)
            progress.update(1)
            progress.set_postfix(epoch=epoch + 1, loss=f"{epoch_loss / seen:.3f}")
        history.append({"epoch": epoch + 1, "loss": round(epoch_loss / seen, 4)})
    progress.close()
    model.eval()
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    print(
        f"[train] {options.epochs} epochs on {len(data.train)} examples in {seconds:.0f}s "
        f"({cpu_seconds:.0f}s CPU, {torch.get_num_threads()} threads)",
        flush=True,
    )
    return TrainedModel(model, labels, tokenizer_dir, history, seconds, cpu_seconds)
