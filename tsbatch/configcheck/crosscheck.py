"""Checks across files: what ``models.yaml`` promises against what ``config.properties``
lets through, and what ``load_models`` names against the manifest and the store.

Each file can be fine alone and the pair still wrong: a handler limit the frontend never
lets a request reach, a batch the compiled package was not exported for. Every finding
names the value to change and in which file.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from tsbatch.archive import artifacts
from tsbatch.archive.manifest import Manifest, ModelSpec
from tsbatch.config.bodies import base64_ceiling
from tsbatch.config.findings import Problem
from tsbatch.config.properties import load_models

# TorchServe 0.12's defaults when config.properties leaves the limits out.
DEFAULT_MAX_REQUEST_SIZE = 6553500
DEFAULT_MAX_RESPONSE_SIZE = 6553500
LABEL_BYTES_WITHOUT_A_BUILD = 64


def _limit(values: dict[str, str], key: str, default: int) -> int:
    text = values.get(key, "").strip()
    return int(text) if text.isdigit() else default


def largest_answer_bytes(spec: ModelSpec) -> int:
    """The JSON size of one input's answer at ``top_k``, with the longest built label."""
    labels_path = spec.artifact_dir / artifacts.LABELS_FILE
    labels = artifacts.read_labels(labels_path) if labels_path.exists() else []
    label = "x" * max([len(str(label).encode()) for label in labels] or [LABEL_BYTES_WITHOUT_A_BUILD])
    answer = spec.kind.largest_answer(spec.name, label, spec.config.top_k)
    return len(json.dumps(answer).encode()) + 2  # the list's comma and space


def body_limits(values: dict[str, str], manifest: Manifest) -> list[Problem]:
    """Handler limits against the frontend's: a limit the frontend cuts first never fires (and
    each kind's own, such as base64 images or texts of max_length tokens)."""
    request_limit = _limit(values, "max_request_size", DEFAULT_MAX_REQUEST_SIZE)
    response_limit = _limit(values, "max_response_size", DEFAULT_MAX_RESPONSE_SIZE)
    problems = []
    for name, spec in manifest.models.items():
        config, where = spec.config, f"models.yaml models.{name}"
        if config.max_body_bytes >= request_limit:
            problems.append(
                Problem(
                    "error",
                    f"{where}.max_body_bytes",
                    f"{config.max_body_bytes} is not below config.properties max_request_size {request_limit}: the "
                    "frontend refuses such bodies first, so the handler's 413 never fires. Lower "
                    f"max_body_bytes to {base64_ceiling(request_limit)} (models.yaml), or raise max_request_size.",
                )
            )
        inputs = config.max_inputs_per_request
        answers = inputs * largest_answer_bytes(spec)
        if answers > response_limit:
            problems.append(
                Problem(
                    "error",
                    f"{where}.max_inputs_per_request",
                    f"{inputs} answers of up to {answers // inputs} bytes make {answers} bytes, above "
                    f"config.properties max_response_size {response_limit}. Lower max_inputs_per_request to "
                    f"{response_limit // (answers // inputs)} (models.yaml) or raise max_response_size.",
                )
            )
        problems += spec.kind.limits(where, config, request_limit)
    return problems


def batch_bounds(settings: dict[str, dict[str, Any]], manifest: Manifest) -> list[Problem]:
    """``batchSize`` against the batch the ``.pt2`` packages were exported for."""
    problems = []
    for name, entry in settings.items():
        if name not in manifest.models or not isinstance(entry.get("batchSize"), int):
            continue
        spec = manifest.models[name]
        built = spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE
        handler = artifacts.read_json(built) if built.exists() else {}
        if built.exists() and not handler.get("compiled_models"):
            continue  # nothing compiled: TorchScript serves any batch
        bound = int(handler.get("compiled_max_batch_size") or spec.config.compile.max_batch_size)
        if entry["batchSize"] > bound:
            problems.append(
                Problem(
                    "warning",
                    f"models.{name}.batchSize",
                    f"{entry['batchSize']} is above the batch of {bound} the compiled .pt2 was exported for, so "
                    f"workers serve TorchScript instead. Lower batchSize to {bound} (config.properties) or raise "
                    "compile.max_batch_size (models.yaml; re-exports).",
                )
            )
    return problems


def loaded_models(
    values: dict[str, str], settings: dict[str, dict[str, Any]], manifest: Manifest, store: Path
) -> list[Problem]:
    """``load_models`` against the models the manifest builds and the archives in the store
    (a model with a ``models=`` entry has its archive checked with the batch settings)."""
    listed = load_models(values)
    names = sorted(path.stem for path in store.glob("*.mar")) if listed is None else listed
    problems = []
    if listed == []:
        problems.append(
            Problem(
                "error", "load_models", "names no model, so TorchServe starts with none: list the archives."
            )
        )
    for name in names:
        if name not in manifest.models:
            problems.append(
                Problem(
                    "error" if listed is not None else "warning",
                    "load_models",
                    f"{name} is not a model of models.yaml, so no build makes or checks it: add it to "
                    f"models.yaml or remove {name}.mar from load_models (and the store).",
                )
            )
        elif name not in settings and not (store / f"{name}.mar").exists():
            problems.append(
                Problem("error", "load_models", f"{name}.mar is not in {store}: run `make archive`.")
            )
    unserved = sorted(set(manifest.models) - set(names)) if listed is not None else []
    for name in unserved:
        problems.append(
            Problem(
                "warning",
                "load_models",
                f"{name} is built from models.yaml but not served: add {name}.mar to load_models.",
            )
        )
    return problems


def worker_settings(settings: dict[str, dict[str, Any]], manifest: Manifest) -> list[Problem]:
    """A kind's worker keys (the image kind's decode pool) only on a model whose worker reads
    them (its kind's config has their fields)."""
    keys = {key.name: key for spec in manifest.models.values() for key in spec.kind.all_worker_keys}
    problems = []
    for name, entry in settings.items():
        if name not in manifest.models:
            continue
        kind = manifest.models[name].kind
        fields = {field.name for field in dataclasses.fields(kind.config)}
        for key in (key for key in keys.values() if key.name in entry and key.field not in fields):
            problems.append(
                Problem(
                    "error",
                    f"models.{name}.{key.name}",
                    f"a {kind.name} model's worker has no {key.part}: "
                    f"remove {key.name} from its entry (config.properties).",
                )
            )
    return problems


def cross_check(
    values: dict[str, str], settings: dict[str, dict[str, Any]], manifest: Manifest, store: Path
) -> list[Problem]:
    return (
        body_limits(values, manifest)
        + batch_bounds(settings, manifest)
        + worker_settings(settings, manifest)
        + loaded_models(values, settings, manifest, store)
    )
