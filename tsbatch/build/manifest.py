"""The model manifest (``models.yaml``): what to build for each served model."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tsbatch.paths import DEFAULT_MANIFEST, DEFAULT_PROPERTIES


class ManifestError(ValueError):
    """models.yaml is missing something the build needs."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    kind: str
    handler: Path
    version: str
    settings: dict[str, Any]
    build_dir: Path

    @property
    def artifact_dir(self) -> Path:
        """Where export writes this model's files (TorchScript, labels, configs)."""
        return self.build_dir / self.name


@dataclass(frozen=True)
class Manifest:
    models: dict[str, ModelSpec]
    build_dir: Path
    model_store: Path

    def model(self, name: str) -> ModelSpec:
        if name not in self.models:
            raise ManifestError(f"model {name!r} is not in the manifest ({sorted(self.models)})")
        return self.models[name]


def _resolve(path: str | Path, root: Path) -> Path:
    path = Path(path)
    return path if path.is_absolute() else root / path


def load_manifest(path: Path = DEFAULT_MANIFEST, build_dir: Path | None = None) -> Manifest:
    document = yaml.safe_load(path.read_text())
    root = path.resolve().parent
    build = build_dir or _resolve(document.get("build_dir", "build"), root)
    store = _resolve(document.get("model_store", "model-store"), root)
    models: dict[str, ModelSpec] = {}
    for name, entry in (document.get("models") or {}).items():
        for required in ("kind", "handler", "version"):
            if required not in entry:
                raise ManifestError(f"models.{name}: missing '{required}'")
        if entry["kind"] not in ("image", "text"):
            raise ManifestError(f"models.{name}: kind must be 'image' or 'text'")
        models[name] = ModelSpec(
            name=name,
            kind=entry["kind"],
            handler=_resolve(entry["handler"], root),
            version=str(entry["version"]),
            settings=entry,
            build_dir=build,
        )
    if not models:
        raise ManifestError(f"{path} declares no models")
    return Manifest(models=models, build_dir=build, model_store=store)


def add_manifest_arguments(parser: argparse.ArgumentParser, choose_models: bool = True) -> None:
    """The options of the commands that read both input files, ``--manifest`` and
    ``--properties``, and (``choose_models``) a repeatable ``--model`` to act on some models only."""
    parser.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    parser.add_argument("--properties", type=Path, default=DEFAULT_PROPERTIES)
    if choose_models:
        parser.add_argument("--model", action="append", help="model name (default: all)")


def parse_manifest_command(
    description: str | None, argv: list[str] | None, *switches: str
) -> tuple[argparse.Namespace, Manifest, list[str]]:
    """Parse :func:`add_manifest_arguments` plus on/off ``switches`` (``--force``) for a
    command over the manifest's models: the arguments, the manifest and the chosen model
    names (all of them when no ``--model`` is given)."""
    parser = argparse.ArgumentParser(description=description)
    add_manifest_arguments(parser)
    for switch in switches:
        parser.add_argument(switch, action="store_true")
    args = parser.parse_args(argv)
    manifest = load_manifest(args.manifest)
    return args, manifest, args.model or list(manifest.models)
