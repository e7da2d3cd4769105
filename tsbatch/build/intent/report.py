"""Train, calibrate the out-of-scope threshold on validation, score on test, and write the
report (``report.json``, ``report.md``) that the quality gates are judged on.

The report is written before the gates are enforced, so a failed build still says which
intents it confused and how.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tsbatch.build import artifacts
from tsbatch.build.intent.data import OOS_LABEL, IntentData, TrainingError, data_from_settings
from tsbatch.build.intent.evaluate import calibrate_threshold, check_gates, evaluate, predict_probabilities
from tsbatch.build.intent.model import DEFAULT_BASE_MODEL
from tsbatch.build.intent.train import TrainedModel, TrainingOptions, train
from tsbatch.build.manifest import ModelSpec

REPORT_JSON = "report.json"
REPORT_MARKDOWN = "report.md"


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


def print_report(out_dir: Path) -> None:
    path = out_dir / REPORT_MARKDOWN
    if path.exists():
        print(path.read_text(), flush=True)


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


def train_from_settings(
    spec: ModelSpec, settings: dict[str, Any], out_dir: Path
) -> tuple[IntentData, TrainedModel, dict[str, Any]]:
    """:func:`train_and_report` as the model's manifest entry (``settings``, with any
    command-line overrides) asks for it; also returns the data it trained on."""
    training = dict(settings.get("training") or {})
    data = data_from_settings(settings)
    trained, report = train_and_report(
        data,
        str(settings.get("base_model", DEFAULT_BASE_MODEL)),
        out_dir,
        int(settings.get("max_length", 64)),
        TrainingOptions.from_settings(training),
        training.get("gates") or {},
        model_name=spec.name,
        oos_label=str(settings.get("oos_label", OOS_LABEL)),
    )
    return data, trained, report
