"""Train, calibrate the out-of-scope threshold on validation, score test (and the blind set
when there is one), and write the report (``report.json``, ``report.md``) that the quality
gates are judged on.

The report is written before the gates are enforced, so a failed build still says which
intents it confused and how.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tsbatch.archive import artifacts
from tsbatch.archive.manifest import ModelSpec
from tsbatch.kinds.text.data import (
    IntentData,
    Leakage,
    TrainingError,
    check_data,
    data_from_settings,
    screen_repeats,
)
from tsbatch.kinds.text.evaluate import calibrate_threshold, check_gates, evaluate, predict_probabilities
from tsbatch.kinds.text.schema import OOS_LABEL, TextModel
from tsbatch.kinds.text.train import TrainedModel, TrainingOptions, train

REPORT_JSON = "report.json"


def split_table(report: dict[str, Any], names: list[str]) -> list[str]:
    lines = [
        "| split | examples | in-scope accuracy | oos recall | oos precision | in-scope rejected "
        "| in-scope macro F1 |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in names:
        values = report[name]
        found = report.get("leakage", {}).get(name)
        note = f" ({found['repeats']} repeats {'dropped' if found['dropped'] else 'kept'})" if found else ""
        count = f"{values['examples']}{note}"
        lines.append(
            f"| {name} | {count} | {values['in_scope_accuracy']:.4f} | {values['oos_recall']:.4f} | "
            f"{values['oos_precision']:.4f} | {values['in_scope_rejected']:.4f} | "
            f"{values.get('in_scope_macro_f1', 0.0):.4f} |"
        )
    return lines


def per_label_table(report: dict[str, Any], names: list[str]) -> list[str]:
    header = " | ".join(f"{name} P | {name} R | {name} F1" for name in names)
    lines = [f"| label | {header} |", "| --- |" + " --- |" * (3 * len(names))]
    for label in report["labels"]:
        cells = []
        for name in names:
            values = report[name].get("per_label", {}).get(label)
            cells += [f"{values[k]:.3f}" for k in ("precision", "recall", "f1")] if values else ["-"] * 3
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def error_lines(split: dict[str, Any], max_cases: int) -> list[str]:
    lines = [] if split["per_intent_errors"] else ["None."]
    for label, entry in split["per_intent_errors"].items():
        cases = "; ".join(
            f'"{c["text"]}" -> {c["predicted"]} ({c["confidence"]:.2f})' for c in entry["cases"][:max_cases]
        )
        more = f" (+{len(entry['cases']) - max_cases} more)" if len(entry["cases"]) > max_cases else ""
        lines.append(f"- **{label}** {entry['errors']}/{entry['examples']}: {cases}{more}")
    return lines


def _leakage_lines(leakage: dict[str, dict[str, Any]]) -> list[str]:
    """Which splits repeat an earlier one, with examples, and which were altered."""
    if not leakage:
        return []
    lines = ["", "Leakage (evaluation texts repeating an earlier split):", ""]
    for name, found in leakage.items():
        fate = (
            "**dropped: this split is altered**, its figures do not compare with published ones"
            if found["dropped"]
            else "kept: the split is scored whole"
        )
        lines.append(
            f"- {name}: {found['repeats']} of {found['size']} ({found['exact']} exact, {found['near']} near), "
            f"{fate}; e.g. {'; '.join(found['examples'])}"
        )
    return lines


def render_markdown(report: dict[str, Any], max_cases: int = 3, max_pairs: int = 15) -> str:
    scored = [name for name in ("validation", "test", "blind") if name in report]
    gated = [name for name in scored if name != "validation"]
    gates = report["gates"]
    lines = [
        f"# Intent classifier report: {report['model']}",
        "",
        f"Base model `{report['base_model']}`; data {report['data']}; "
        f"{report['train_examples']} training examples, {len(report['labels'])} labels; "
        f"trained in {report['training_seconds']:.0f}s.",
        f"Out of scope: the `{report['oos_label']}` class, or top probability below "
        f"**{report['oos_threshold']:.2f}** (calibrated on validation: most room under both gates).",
        "",
        *split_table(report, scored),
    ]
    lines += _leakage_lines(report.get("leakage", {}))
    verdict = "PASS" if report["passed"] else "FAIL: " + "; ".join(report["failures"])
    lines += [
        "",
        f"Gates ({', '.join(gated)}): in-scope accuracy >= {gates.get('in_scope_accuracy')}, "
        f"oos recall >= {gates.get('oos_recall')}: **{verdict}**",
        "",
        "## Per label precision / recall / F1",
        "",
        *per_label_table(report, gated),
    ]
    for name in gated:
        pairs = report[name].get("confusion_pairs", [])
        lines += ["", f"## Confusion pairs ({name}: true -> predicted)", ""]
        lines += [f"- {p['true']} -> {p['predicted']}: {p['count']}" for p in pairs[:max_pairs]] or ["None."]
        if len(pairs) > max_pairs:
            lines.append(f"- (+{len(pairs) - max_pairs} more pairs in report.json)")
        lines += ["", f"## {name.capitalize()} errors by intent", "", *error_lines(report[name], max_cases)]
    return "\n".join(lines) + "\n"


def write_report(report: dict[str, Any], out_dir: Path) -> Path:
    artifacts.write_json(out_dir / REPORT_JSON, report)
    path = out_dir / artifacts.REPORT_MARKDOWN
    path.write_text(render_markdown(report))
    return path


def print_report(out_dir: Path) -> None:
    path = out_dir / artifacts.REPORT_MARKDOWN
    if path.exists():
        print(path.read_text(), flush=True)


def train_and_report(
    data: IntentData,
    base_model: str,
    out_dir: Path,
    max_length: int,
    options: TrainingOptions,
    gates: dict[str, float],
    model_name: str,
    oos_label: str = OOS_LABEL,
    leakage: dict[str, Leakage] | None = None,
) -> tuple[TrainedModel, dict[str, Any]]:
    """Train, calibrate on validation, score every evaluation split, write the report;
    raise when test or blind is below a gate."""
    trained = train(data, base_model, out_dir, max_length, options, oos_label)
    splits = data.evaluation_splits()
    probabilities = {
        name: predict_probabilities(trained.model, trained.tokenizer_dir, [t for t, _ in rows], max_length)
        for name, rows in splits.items()
    }
    threshold, _ = calibrate_threshold(
        probabilities["validation"],
        trained.labels,
        [label for _, label in data.validation],
        oos_label,
        gates=gates,
    )
    scored = {
        name: evaluate(probabilities[name], trained.labels, rows, threshold, oos_label)
        for name, rows in splits.items()
    }
    failures = check_gates({name: values for name, values in scored.items() if name != "validation"}, gates)
    report = {
        "model": model_name,
        "base_model": base_model,
        "data": data.source,
        "labels": trained.labels,
        "oos_label": oos_label,
        "oos_threshold": threshold,
        "train_examples": len(data.train),
        "training": {**options.model_dump(exclude={"gates"}), "history": trained.history},
        "training_seconds": round(trained.seconds, 1),
        "training_cpu_seconds": round(trained.cpu_seconds, 1),
        **scored,
        "leakage": {name: found.as_dict() for name, found in (leakage or {}).items()},
        "gates": gates,
        "passed": not failures,
        "failures": failures,
    }
    path = write_report(report, out_dir)
    summary = ", ".join(
        f"{name} in-scope {values['in_scope_accuracy']:.4f} / oos recall {values['oos_recall']:.4f}"
        for name, values in scored.items()
    )
    print(
        f"[train] {summary} (threshold {threshold:.2f}): {'PASS' if not failures else 'FAIL'}; report {path}",
        flush=True,
    )
    if failures:
        raise TrainingError("quality gates failed: " + "; ".join(failures) + f" (report: {path})")
    return trained, report


def train_from_settings(
    spec: ModelSpec, settings: TextModel, out_dir: Path
) -> tuple[IntentData, TrainedModel, dict[str, Any]]:
    """:func:`train_and_report` as the model's manifest entry (``settings``, with any
    command-line overrides) asks for it; also returns the data it trained on."""
    oos_label = settings.oos_label
    read = data_from_settings(settings.data)
    check_data(read, oos_label)
    section = settings.data
    data, leakage = screen_repeats(read, section.strict, section.drop_repeats, section.near_duplicate_overlap)
    for found in leakage.values():
        print(found.warning(), file=sys.stderr, flush=True)
    trained, report = train_and_report(
        data,
        settings.base_model,
        out_dir,
        settings.max_length,
        settings.training,
        settings.training.gates.model_dump(),
        model_name=spec.name,
        oos_label=oos_label,
        leakage=leakage,
    )
    return data, trained, report
