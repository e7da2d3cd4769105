"""The model manifest (``models.yaml``): what to build for each served model.

Each entry is validated where it is loaded against its kind's typed model (the kind named
by its ``kind:`` among the installed ones, ``tsbatch.archive.kind.installed_kinds``, unless
the caller passes its own); a bad entry is one :class:`ManifestError` listing every problem
with the file, the model, the key and, for an unknown key, the nearest valid one.
"""

from __future__ import annotations

import argparse
import difflib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from tsbatch.archive.kind import Kind, installed_kinds
from tsbatch.archive.schema import Common
from tsbatch.paths import DEFAULT_MANIFEST, DEFAULT_PROPERTIES
from tsbatch.workloads.workload import Workload

TOP_LEVEL_KEYS = ("build_dir", "model_store", "models")
EntryT = TypeVar("EntryT", bound=Common)


class ManifestError(ValueError):
    """models.yaml is missing something the build needs, or says something it cannot use."""


class UnknownModel(ValueError):
    """A model name that models.yaml does not declare: nothing says what to send it."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    kind: Kind  # the kind its ``kind:`` names
    config: Common  # the entry model of its kind (``kind.entry``)
    build_dir: Path
    root: Path

    @property
    def version(self) -> str:
        return self.config.version

    @property
    def handler(self) -> Path:
        return resolve_path(self.config.handler, self.root)

    @property
    def artifact_dir(self) -> Path:
        """Where export writes this model's files (TorchScript, labels, configs)."""
        return self.build_dir / self.name

    def with_settings(self, **updates: Any) -> ModelSpec:
        """This spec with top-level manifest keys replaced, validated as the file's would be."""
        entry = {**self.config.model_dump(mode="json", exclude_unset=True), **updates}
        return replace(self, config=validate_entry(self.name, entry, Path("<override>"), self.kind))

    def entry_as(self, entry_type: type[EntryT]) -> EntryT:
        """The entry as the model of one kind; a ManifestError for a model of another kind."""
        if not isinstance(self.config, entry_type):
            raise ManifestError(f"models.{self.name} is kind {self.kind.name!r}, not a {entry_type.__name__}")
        return self.config


@dataclass(frozen=True)
class Manifest:
    models: dict[str, ModelSpec]
    build_dir: Path
    model_store: Path

    def model(self, name: str) -> ModelSpec:
        if name not in self.models:
            raise ManifestError(f"model {name!r} is not in the manifest ({sorted(self.models)})")
        return self.models[name]

    def kind_of(self, model: str) -> Kind:
        """The kind of ``model``, for the tools given a model's name (``--mix``, the GPU check,
        the tuner); :class:`UnknownModel` when it has no entry."""
        if model not in self.models:
            raise UnknownModel(
                f"model {model!r} is not in models.yaml ({', '.join(self.models)}), so its kind and the "
                "requests it takes are unknown: add it to models.yaml, or give its requests with --requests"
            )
        return self.models[model].kind

    def first_of_kind(self, kind: str) -> str:
        """The first model of the kind named ``kind``: what a kind's own command acts on by default."""
        names = [name for name, spec in self.models.items() if spec.kind.name == kind]
        if not names:
            raise ManifestError(f"models.yaml has no model of kind {kind!r}: give --model")
        return names[0]


def workload_for(model: str, manifest: Manifest | None = None) -> Workload:
    """What a load generator sends ``model`` and how it checks the answers."""
    return (manifest or load_manifest()).kind_of(model).workload


def resolve_path(path: str | Path, root: Path) -> Path:
    path = Path(path)
    return path if path.is_absolute() else root / path


def nearest(key: str, valid: typing.Iterable[str]) -> str:
    """`` (did you mean `x`?)`` for the closest valid key, or nothing when none is close."""
    match = difflib.get_close_matches(key, list(valid), n=1, cutoff=0.6)
    return f" (did you mean `{match[0]}`?)" if match else ""


def _section_type(annotation: Any) -> type[BaseModel] | None:
    """The section model a field holds (``Verify``, ``Compile | None``...), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        for member in typing.get_args(annotation):
            found = _section_type(member)
            if found is not None:
                return found
    return None


def describe_error(error: dict[str, Any], model_type: type[BaseModel]) -> str:
    """One validation error as ``key.path: what is wrong``, suggesting the nearest valid key."""
    section: type[BaseModel] | None = model_type
    path: list[str] = []
    for part in error["loc"]:
        path.append(str(part))
        if section is None or not isinstance(part, str):
            continue
        field = section.model_fields.get(part)
        if field is None:
            break
        section = _section_type(field.annotation)
    key = ".".join(path)
    if error["type"] == "extra_forbidden" and section is not None:
        return f"`{key}`: unknown key{nearest(path[-1], section.model_fields)}"
    if error["type"] == "missing":
        return f"`{key}`: required"
    return f"`{key}`: {error['msg']} (got {error.get('input')!r})"


def entry_kind(name: str, entry: Any, source: Path, kinds: Mapping[str, Kind]) -> Kind:
    """The kind a ``models:`` entry names, among ``kinds``; ManifestError naming the known ones."""
    where = f"{source}: models.{name}"
    if not isinstance(entry, dict):
        raise ManifestError(f"{where}: expected a mapping of settings, got {entry!r}")
    kind = entry.get("kind")
    if kind not in kinds:
        raise ManifestError(
            f"{where}: `kind` must be one of {sorted(kinds)} (got {kind!r}){nearest(str(kind), kinds)}"
        )
    return kinds[kind]


def validate_entry(name: str, entry: dict[str, Any], source: Path, kind: Kind) -> Common:
    """One ``models:`` entry as the typed model of its ``kind``; ManifestError listing every problem."""
    where, model_type = f"{source}: models.{name}", kind.entry
    try:
        return model_type.model_validate({"handler": kind.handler, **entry})
    except ValidationError as exc:
        problems = [describe_error(dict(error), model_type) for error in exc.errors()]
        raise ManifestError(f"{where} ({kind.name}): " + "; ".join(problems)) from None


def load_manifest(
    path: Path = DEFAULT_MANIFEST, build_dir: Path | None = None, kinds: Mapping[str, Kind] | None = None
) -> Manifest:
    """``models.yaml`` with each entry validated as its kind's model, among ``kinds`` (default:
    the installed ones)."""
    document = yaml.safe_load(path.read_text()) or {}
    if not isinstance(document, dict):
        raise ManifestError(f"{path}: expected a mapping with {list(TOP_LEVEL_KEYS)}")
    unknown = [key for key in document if key not in TOP_LEVEL_KEYS]
    if unknown:
        raise ManifestError(f"{path}: unknown key `{unknown[0]}`{nearest(str(unknown[0]), TOP_LEVEL_KEYS)}")
    root = path.resolve().parent
    build = build_dir or resolve_path(document.get("build_dir", "build"), root)
    store = resolve_path(document.get("model_store", "model-store"), root)
    known = installed_kinds() if kinds is None else kinds
    problems: list[str] = []
    models: dict[str, ModelSpec] = {}
    for name, entry in (document.get("models") or {}).items():
        try:
            kind = entry_kind(name, entry, path, known)
            models[name] = ModelSpec(name, kind, validate_entry(name, entry, path, kind), build, root)
        except ManifestError as exc:
            problems.append(str(exc))
    if problems:
        raise ManifestError("\n".join(problems))
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
    description: str, argv: list[str] | None, *switches: str
) -> tuple[argparse.Namespace, Manifest, list[str]]:
    """Parse :func:`add_manifest_arguments` plus on/off ``switches`` (``--force``) for a
    command over the manifest's models: the arguments, the manifest and the chosen model
    names (all of them when no ``--model`` is given)."""
    parser = argparse.ArgumentParser(description=description)
    add_manifest_arguments(parser)
    for switch in switches:
        parser.add_argument(switch, action="store_true")
    args = parser.parse_args(argv)
    try:
        manifest = load_manifest(args.manifest)
    except ManifestError as exc:  # the build refuses a manifest it cannot trust
        parser.exit(1, f"{exc}\n")
    return args, manifest, args.model or list(manifest.models)
