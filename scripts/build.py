"""Build every archive in the manifest: export (only when needed), then package.

Export is the slow part (training, TorchScript, verification) and runs only when the
model's artifact is missing or ``--force-export`` is given. Packaging re-runs whenever
``config.properties`` or the handler code changed, so a batch-setting edit takes seconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from scripts import artifacts
from scripts.manifest import DEFAULT_MANIFEST, ModelSpec, load_manifest
from scripts.package import DEFAULT_PROPERTIES, package


def export_model(spec: ModelSpec) -> None:
    if spec.kind == "image":
        from scripts.export_resnet import export
    else:
        from scripts.export_intent import export  # type: ignore[no-redef]
    export(spec)


def needs_export(spec: ModelSpec) -> bool:
    required = (artifacts.MODEL_FILE, artifacts.HANDLER_CONFIG_FILE, artifacts.LABELS_FILE)
    return not all((spec.artifact_dir / name).exists() for name in required)


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
            if args.force_export or needs_export(spec):
                started = time.perf_counter()
                export_model(spec)
                print(f"[build] exported {name} in {time.perf_counter() - started:.0f}s")
            package(spec, manifest, args.properties)
        except Exception as exc:
            print(f"[build] FAILED for {name}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
