"""Build every archive in the manifest: export (only when needed), then package.

Export is the slow part (training, TorchScript, verification) and runs only when the
model's artifacts are missing, its manifest entry or the files it names (data, weights)
changed since the last export, or ``--force-export`` is given. Packaging re-runs whenever
``config.properties`` or the handler code changed, so a batch-setting edit takes seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from tsbatch.paths import REPO_ROOT

from tsbatch.build import artifacts
from tsbatch.build.manifest import DEFAULT_MANIFEST, ModelSpec, load_manifest
from tsbatch.build.package import DEFAULT_PROPERTIES, package


def export_model(spec: ModelSpec) -> None:
    if spec.kind == "image":
        from tsbatch.build.resnet.export import export
    else:
        from tsbatch.build.intent.export import export  # type: ignore[no-redef]
    export(spec)


EXPORT_INPUTS_FILE = "export_inputs.json"


def export_inputs(spec: ModelSpec, root: Path) -> dict[str, Any]:
    """What an export is made from: the manifest entry and the files it names (data, weights).

    The handler file is left out: packaging copies it, so handler edits need no re-export.
    """
    entry = {key: value for key, value in spec.settings.items() if key != "handler"}
    files: dict[str, str] = {}

    def visit(value: Any) -> None:
        if isinstance(value, dict | list):
            for child in value.values() if isinstance(value, dict) else value:
                visit(child)
        elif isinstance(value, str) and value:
            path = Path(value) if Path(value).is_absolute() else root / value
            if path.is_file():
                files[value] = artifacts.file_digest(path)

    visit(entry)
    return {"manifest_entry": json.loads(json.dumps(entry, default=str)), "files": files}


def needs_export(spec: ModelSpec, root: Path = REPO_ROOT) -> str | None:
    """Why the model must be exported again, or None when its artifacts are current."""
    required = (artifacts.MODEL_FILE, artifacts.HANDLER_CONFIG_FILE, artifacts.LABELS_FILE)
    missing = [name for name in required if not (spec.artifact_dir / name).exists()]
    if missing:
        return f"no {', '.join(missing)} in {spec.artifact_dir}"
    stamp = spec.artifact_dir / EXPORT_INPUTS_FILE
    if not stamp.exists():
        return "artifacts predate export stamps"
    recorded = artifacts.read_json(stamp)
    current = export_inputs(spec, root)
    if recorded.get("manifest_entry") != current["manifest_entry"]:
        return "its manifest entry changed"
    if recorded.get("files") != current["files"]:
        changed = sorted(set(recorded.get("files", {}).items()) ^ set(current["files"].items()))
        return f"its input files changed ({', '.join(sorted({name for name, _ in changed}))})"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    parser.add_argument("--properties", type=Path, default=DEFAULT_PROPERTIES)
    parser.add_argument("--model", action="append", help="model name (default: all)")
    parser.add_argument("--force-export", action="store_true")
    args = parser.parse_args(argv)
    manifest = load_manifest(args.manifest)
    for name in args.model or list(manifest.models):
        spec = manifest.model(name)
        try:
            reason = (
                "--force-export" if args.force_export else needs_export(spec, args.manifest.resolve().parent)
            )
            if reason:
                print(f"[build] exporting {name}: {reason}")
                started = time.perf_counter()
                export_model(spec)
                artifacts.write_json(
                    spec.artifact_dir / EXPORT_INPUTS_FILE,
                    export_inputs(spec, args.manifest.resolve().parent),
                )
                print(f"[build] exported {name} in {time.perf_counter() - started:.0f}s")
            package(spec, manifest, args.properties)
        except Exception as exc:
            print(f"[build] FAILED for {name}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
