"""Build every archive in the manifest: export (only when needed), then package.

Export is the slow part (training, TorchScript, verification) and runs only when the
model's artifacts are missing, its manifest entry or the files it names (data, weights)
changed since the last export, or ``--force-export`` is given. Packaging re-runs whenever
``config.properties`` or the handler code changed, so a batch-setting edit takes seconds.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from batchkit.config import from_mapping
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import ModelSpec, parse_manifest_command
from tsbatch.archive.package import package
from tsbatch.archive.schema import SERVING_KEYS
from tsbatch.paths import REPO_ROOT

EXPORT_INPUTS_FILE = "export_inputs.json"


def export_model(spec: ModelSpec) -> None:
    """Run the exporter of the model's kind, which imports its libraries (torchvision and
    scikit-learn, transformers) only then: the others do not need them."""
    spec.kind.exporter().export(spec)


def export_inputs(spec: ModelSpec, root: Path) -> dict[str, Any]:
    """What an export is made from: the manifest entry and the files and folders it names
    (data, weights, a ``save_pretrained`` folder).

    The handler file and the serving-time keys are left out: packaging copies them, so
    editing them needs no re-export.
    """
    entry = spec.config.model_dump(mode="json", exclude_unset=True, exclude={"handler", *SERVING_KEYS})
    files: dict[str, str] = {}

    def visit(value: Any) -> None:
        if isinstance(value, dict | list):
            for child in value.values() if isinstance(value, dict) else value:
                visit(child)
        elif isinstance(value, str) and value:
            path = Path(value) if Path(value).is_absolute() else root / value
            if path.is_file():
                files[value] = artifacts.file_digest(path)
            elif path.is_dir() and not path.samefile(root):
                files[value] = artifacts.folder_digest(path)

    visit(entry)
    return {"manifest_entry": json.loads(json.dumps(entry, default=str)), "files": files}


def needs_export(spec: ModelSpec, root: Path = REPO_ROOT) -> str | None:
    """Why the model must be exported again, or None when its artifacts are current."""
    required = [artifacts.HANDLER_CONFIG_FILE, artifacts.LABELS_FILE]
    config_file = spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE
    if config_file.exists():  # its model file: "" where the archive has no TorchScript
        required.append(artifacts.read_json(config_file).get("model_file", artifacts.MODEL_FILE))
    missing = [name for name in required if name and not (spec.artifact_dir / name).exists()]
    if missing:
        return f"no {', '.join(missing)} in {spec.artifact_dir}"
    stamp = spec.artifact_dir / EXPORT_INPUTS_FILE
    if not stamp.exists():
        return "artifacts predate export stamps"
    try:  # an export by another version of the toolkit: its worker config has other fields
        from_mapping(spec.kind.config, artifacts.read_json(spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE))
    except (ValueError, TypeError) as exc:
        return f"its handler config does not fit this toolkit's ({exc})"
    recorded = artifacts.read_json(stamp)
    current = export_inputs(spec, root)
    # Serving keys recorded by an older toolkit are not what the export was made from.
    entry = {k: v for k, v in (recorded.get("manifest_entry") or {}).items() if k not in SERVING_KEYS}
    if entry != current["manifest_entry"]:
        return "its manifest entry changed"
    if recorded.get("files") != current["files"]:
        changed = sorted(set(recorded.get("files", {}).items()) ^ set(current["files"].items()))
        return f"its input files changed ({', '.join(sorted({name for name, _ in changed}))})"
    return None


def export_if_needed(spec: ModelSpec, root: Path, force: bool) -> None:
    """Export when :func:`needs_export` (or ``force``) says so, then stamp what it was made from."""
    reason = "--force-export" if force else needs_export(spec, root)
    if not reason:
        return
    print(f"[build] exporting {spec.name}: {reason}")
    started = time.perf_counter()
    export_model(spec)
    artifacts.write_json(spec.artifact_dir / EXPORT_INPUTS_FILE, export_inputs(spec, root))
    print(f"[build] exported {spec.name} in {time.perf_counter() - started:.0f}s")


def main(argv: list[str] | None = None) -> int:
    args, manifest, names = parse_manifest_command(
        "Build every model of models.yaml: export and verify it when its inputs changed "
        "(or with --force-export), then package it with the settings of config.properties.",
        argv,
        "--force-export",
    )
    for name in names:
        spec = manifest.model(name)
        try:
            export_if_needed(spec, args.manifest.resolve().parent, args.force_export)
            package(spec, manifest, args.properties)
        except Exception as exc:
            print(f"[build] FAILED for {name}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
    return 0
