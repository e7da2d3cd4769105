"""A model's kind, and so its workload, by the model's name in ``models.yaml``: what the tools
given a model name (``--mix``, the GPU check, the tuner) ask."""

from __future__ import annotations

from tsbatch.archive.manifest import Manifest, ManifestError, load_manifest
from tsbatch.kinds.kind import Kind
from tsbatch.kinds.registry import kind_of
from tsbatch.workloads.workload import Workload


class UnknownModel(ValueError):
    """A model name that models.yaml does not declare: nothing says what to send it."""


def kind_named(model: str, manifest: Manifest | None = None) -> Kind:
    """The kind of ``model`` in the manifest; :class:`UnknownModel` when it has no entry."""
    manifest = manifest or load_manifest()
    if model not in manifest.models:
        raise UnknownModel(
            f"model {model!r} is not in models.yaml ({', '.join(manifest.models)}), so its kind and "
            "the requests it takes are unknown: add it to models.yaml, or give its requests with --requests"
        )
    return kind_of(manifest.models[model])


def first_of_kind(kind: Kind, manifest: Manifest) -> str:
    """The manifest's first model of ``kind``: what a kind's own command acts on by default."""
    names = [name for name, spec in manifest.models.items() if kind_of(spec) is kind]
    if not names:
        raise ManifestError(f"models.yaml has no model of kind {kind.name!r}: give --model")
    return names[0]


def workload_for(model: str, manifest: Manifest | None = None) -> Workload:
    """What a load generator sends ``model`` and how it checks the answers."""
    return kind_named(model, manifest).workload
