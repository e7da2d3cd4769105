"""Your fine-tuned classifier instead of training one (``weights: {path: DIR}``): its labels,
tokenizer and max_length from the folder, its scores on labelled data when you give some
(gated like a trained model's), else texts on which the serving candidates must agree with
fp32, and the report that says where the model came from.

    tsbatch export --model M --weights DIR [--test test.csv | --data-format clinc150 --data my.json]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tsbatch.archive import artifacts
from tsbatch.archive.manifest import ModelSpec
from tsbatch.kinds.text.data import Example, TrainingError, evaluation_splits, has_evaluation_data
from tsbatch.kinds.text.evaluate import check_gates, evaluate, predict_probabilities
from tsbatch.kinds.text.gating import labelled_gate_inputs
from tsbatch.kinds.text.model import TOKENIZER_DIR, ReadyClassifier, save_tokenizer
from tsbatch.kinds.text.pretrained import (
    PretrainedError,
    PretrainedFolder,
    SequenceClassifier,
    check_inputs,
    default_max_length,
    load_classifier,
    read_folder,
)
from tsbatch.kinds.text.report import REPORT_JSON, error_lines, per_label_table, split_table
from tsbatch.kinds.text.schema import TextModel
from tsbatch.kinds.text.utterances import read_utterances
from tsbatch.paths import REPO_ROOT

# Texts the candidates are gated on without labelled data (the project's utterances).
GATE_TEXTS = 128
# The handler's out-of-scope label when none was asked for: no answer is ever out of scope.
NO_OOS_LABEL = ""


def repository_path(value: str) -> Path:
    path = Path(value)
    return path if path.is_absolute() else REPO_ROOT / path


def out_of_scope(settings: TextModel, labels: Sequence[str]) -> tuple[str, float]:
    """The label out-of-scope answers get and the confidence threshold, only when asked:
    ``oos_label`` set in the entry (a label of the model) and/or ``weights.oos_threshold``."""
    assert settings.weights is not None
    threshold = settings.weights.oos_threshold
    named = "oos_label" in settings.model_fields_set
    if not named and threshold is None:
        return NO_OOS_LABEL, 0.0
    if threshold is None and settings.oos_label not in labels:
        raise PretrainedError(
            f"oos_label {settings.oos_label!r} is not a label of the model ({', '.join(labels)}): name one "
            "of them, or give weights.oos_threshold (--oos-threshold) to answer it below a confidence"
        )
    return settings.oos_label, threshold or 0.0


def check_labels(splits: dict[str, list[Example]], labels: Sequence[str], oos_label: str) -> None:
    """Every labelled text names a label of the model, or the out-of-scope label asked for."""
    known = {*labels, *([oos_label] if oos_label else [])}
    for name, rows in splits.items():
        unknown = sorted({label for _, label in rows} - known)
        if unknown:
            raise PretrainedError(
                f"{name} has labels the model does not have: {unknown[:5]} (its labels: {', '.join(labels)}); "
                "fix the data, or for out-of-scope texts ask for out of scope (oos_label and/or "
                "weights.oos_threshold; --oos-label, --oos-threshold)"
            )


def unlabelled_texts(path: str | None) -> tuple[list[str], str]:
    """The texts the candidates are gated on without labels: yours (one per line), else the
    project's utterances."""
    if path is None:
        return read_utterances(shuffle_seed=0)[:GATE_TEXTS], f"{GATE_TEXTS} of the project's utterances"
    file = repository_path(path)
    if not file.is_file():
        raise PretrainedError(f"weights.texts {file} does not exist (a text file, one text per line)")
    texts = [line.strip() for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not texts:
        raise PretrainedError(f"weights.texts {file} has no text (one text per line)")
    return texts, f"{len(texts)} texts of {path}"


def tokenizer_from(folder: PretrainedFolder, out: Path, max_length: int) -> Path:
    try:
        return save_tokenizer(str(folder.path), out / TOKENIZER_DIR, max_length)
    except TrainingError:
        raise
    except Exception as exc:
        raise PretrainedError(
            f"{folder.path} has no tokenizer transformers can load ({type(exc).__name__}: {str(exc)[:200]}): "
            "save the tokenizer the model was fine-tuned with into the folder (tokenizer.save_pretrained)"
        ) from None


def resolved_settings(settings: TextModel, max_length: int, oos_label: str) -> TextModel:
    """The entry as built: the folder's max_length and the out-of-scope label decided."""
    values = {**settings.model_dump(mode="json", exclude_unset=True), "max_length": max_length}
    try:
        return TextModel.model_validate({**values, "oos_label": oos_label})
    except ValidationError as exc:
        raise PretrainedError(f"{settings.weights}: {exc}") from None


def from_folder(spec: ModelSpec, settings: TextModel, out: Path) -> ReadyClassifier:
    """Read, check and score your folder; write the report; raise when a quality gate fails."""
    assert settings.weights is not None
    folder = read_folder(repository_path(settings.weights.path))
    if "max_length" in settings.model_fields_set:
        max_length, why = settings.max_length, "set in the entry"
    else:
        max_length, why = default_max_length(folder)
    oos_label, threshold = out_of_scope(settings, folder.labels)
    tokenizer_dir = tokenizer_from(folder, out, max_length)
    reference = load_classifier(folder)
    check_inputs(reference, folder, tokenizer_dir, max_length)
    model = SequenceClassifier(reference).eval()
    report: dict[str, Any] = {
        "model": spec.name,
        "weights": {
            "source": "your save_pretrained folder",
            "path": str(folder.path),
            "architecture": folder.architecture,
            "model_type": folder.model_type,
            "files": folder.files,
        },
        "labels": folder.labels,
        "max_length": {"value": max_length, "why": why},
        "out_of_scope": {"label": oos_label or None, "threshold": threshold},
        "failures": [],
    }
    if has_evaluation_data(settings.data):
        splits, report["data"] = evaluation_splits(settings.data)
        check_labels(splits, folder.labels, oos_label)
        for name, rows in splits.items():
            probabilities = predict_probabilities(model, tokenizer_dir, [t for t, _ in rows], max_length)
            report[name] = evaluate(probabilities, folder.labels, rows, threshold, oos_label)
        report["gates"] = settings.training.gates.model_dump()
        report["failures"] = check_gates({name: report[name] for name in splits}, report["gates"])
        gate_texts, score = labelled_gate_inputs(folder.labels, splits, threshold, oos_label)
    else:
        texts, report["gate_texts"] = unlabelled_texts(settings.weights.texts)
        gate_texts, score = {"texts": texts}, None
        print(
            f"[export] no labelled data: the candidates are gated on agreement with fp32 over {report['gate_texts']}"
        )
    write_report(report, out)
    if report["failures"]:
        print(render_markdown(report), file=sys.stderr)
        raise TrainingError("quality gates failed: " + "; ".join(report["failures"]))
    return ReadyClassifier(
        model=model,
        labels=folder.labels,
        tokenizer_dir=tokenizer_dir,
        settings=resolved_settings(settings, max_length, oos_label),
        threshold=threshold,
        gate_texts=gate_texts,
        score=score,
        description=folder.describe(),
        build_info=build_info(report),
        reference=reference,
    )


def build_info(report: dict[str, Any]) -> dict[str, Any]:
    """What build_info.json keeps of the report: the source, what was read, the scores."""
    keys = ("weights", "max_length", "out_of_scope", "data", "gate_texts")
    info = {key: report[key] for key in keys if key in report}
    scores = ("examples", "in_scope_accuracy", "oos_recall", "oos_precision")
    return info | {
        name: {key: report[name][key] for key in scores} for name in ("test", "blind") if name in report
    }


def render_markdown(report: dict[str, Any]) -> str:
    """Where the model came from, what was read from its folder, and its scores."""
    weights, length, scope = report["weights"], report["max_length"], report["out_of_scope"]
    files = ", ".join(f"{name} {digest}" for name, digest in weights["files"].items())
    if scope["label"] is None:
        decided = "not asked: every answer is one of the model's labels"
    else:
        decided = f"the `{scope['label']}` label" + (
            f", or top probability below **{scope['threshold']:.2f}**" if scope["threshold"] else ""
        )
    lines = [
        f"# Text classifier report: {report['model']}",
        "",
        f"Weights: your `{weights['architecture']}` (`{weights['model_type']}`) from `{weights['path']}`, "
        f"served as it is (not trained here); sha256 prefixes: {files}.",
        f"{len(report['labels'])} labels (config.json's id2label): {', '.join(report['labels'])}.",
        f"max_length {length['value']}: {length['why']}. Tokenizer: the folder's (`{TOKENIZER_DIR}/`).",
        f"Out of scope: {decided}.",
        "",
    ]
    scored = [name for name in ("test", "blind") if name in report]
    if not scored:
        lines.append(
            f"No labelled data: the serving candidates are gated on agreement with fp32 over "
            f"{report['gate_texts']}; accuracy is not measured. Give a test CSV (`--test`, "
            "`data.test`) or a CLINC150-style JSON (`--data`) to measure and gate it."
        )
        return "\n".join(lines) + "\n"
    gates = report["gates"]
    verdict = "PASS" if not report["failures"] else "FAIL: " + "; ".join(report["failures"])
    lines += [
        f"Labelled data: {report['data']}.",
        "",
        *split_table(report, scored),
        "",
        f"Gates ({', '.join(scored)}): in-scope accuracy >= {gates['in_scope_accuracy']}, "
        f"oos recall >= {gates['oos_recall']}: **{verdict}**",
        "",
        "## Per label precision / recall / F1",
        "",
        *per_label_table(report, scored),
    ]
    for name in scored:
        lines += ["", f"## {name.capitalize()} errors by label", "", *error_lines(report[name], 3)]
    return "\n".join(lines) + "\n"


def write_report(report: dict[str, Any], out: Path) -> None:
    artifacts.write_json(out / REPORT_JSON, report)
    (out / artifacts.REPORT_MARKDOWN).write_text(render_markdown(report))
