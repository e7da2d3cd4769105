"""One model kind as the toolkit sees it: a frozen record of its types, files and callables,
and the one lookup of the installed kinds.

The core never imports a kind: each kind's package (``tsbatch/kinds/<kind>/``, or another
installed package) registers its record in the ``tsbatch.kinds`` entry-point group, and the
manifest's ``kind:`` names one of them. Its heavy parts (the exporter, the sweep's model
loaders) are plain callables on the record, each of which imports its module when called:
they pull in libraries (torchvision and scikit-learn, transformers) that the other kinds
and the load generators never need.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Protocol

from batchkit.config import ModelConfig, from_mapping, to_mapping
from batchkit.protocols import InputSchema
from tsbatch.archive import artifacts
from tsbatch.archive.schema import Common, handler_values
from tsbatch.config.findings import Problem
from tsbatch.settings.batch import SHARED_WORKER_KEYS, WorkerKey
from tsbatch.workloads.workload import Workload

# The handler config fields every build writes whatever the kind: the archive's files, the
# gates' record and timings (tsbatch.archive.compiled) and, at packaging, the worker's
# threads and default deadline budget.
BUILD_FIELDS = frozenset(
    {
        "model_name",
        "model_file",
        "labels_file",
        "torch_threads",
        "deadline_budget_ms",
        "compiled_models",
        "compiled_max_batch_size",
        "failed_gates",
        "check_outputs",
        "compiled_cpu_flags",
        "timings_ms",
    }
)


class KindModel(Protocol):
    """What a kind's build and sweep callables are given: a manifest's model
    (``tsbatch.archive.manifest.ModelSpec``, which holds its Kind and so is named here by
    what they read of it)."""

    name: str
    kind: Kind
    config: Common
    root: Path

    @property
    def artifact_dir(self) -> Path: ...


class TakesOptions(Protocol):
    """An argparse parser or argument group: where a kind adds its own command-line options."""

    def add_argument(self, *names: str, **settings: Any) -> Any: ...


class Exporter(Protocol):
    """A kind's build (its export module): ``export(spec)`` writes build/<model>/, and
    ``export_with_options(spec, args)`` does it for ``tsbatch export``."""

    def export(self, spec: KindModel) -> object: ...

    def export_with_options(self, spec: KindModel, args: argparse.Namespace) -> int: ...


class SweptModels(Protocol):
    """A kind's in-process swept models (``tsbatch.analysis.sweep.swept.SweptModel``, a layer
    above this one): a built archive's, by model name and artifact folder, and a
    random-weight stand-in of a model's shape built in a work folder, named
    "<model>-<stand_in>"."""

    def archive_swept_model(self, name: str, artifact_dir: Path) -> Any: ...

    def stand_in(self, spec: KindModel, work_dir: Path) -> Any: ...


@dataclass(frozen=True)
class Kind:
    """Everything kind-specific: ``models.yaml``'s entry, the worker's config and handler, the
    export, the sweep, the load generators' workload, the archive's input metadata and the
    kind's own body-size limits."""

    name: str  # the manifest's ``kind:``, and its entry point's name
    entry: type[Common]  # the models.yaml entry (its schema module)
    # What the worker reads (a batchkit.config.ModelConfig subclass, in batchkit.config or the
    # kind's own handler modules; travels in the .mar).
    config: type[ModelConfig]
    # The handler file, when the manifest entry names none: relative to models.yaml's folder,
    # or absolute (a kind from another package names the file it installs).
    handler: str
    # Config fields the export fills from what it built (weights found, threshold chosen...),
    # beside the manifest's handler keys and BUILD_FIELDS.
    resolved: frozenset[str]
    # The build and the sweep, each a function that imports the kind's module when called
    # (its heavy libraries load only when a build or a sweep runs): ``exporter()`` gives what
    # ``tsbatch archive`` and ``tsbatch export`` call (the latter with the options
    # ``export_options`` adds), ``swept_models()`` the models the in-process sweep times.
    exporter: Callable[[], Exporter]
    export_options: Callable[[TakesOptions], None]
    swept_models: Callable[[], SweptModels]
    stand_in: str
    workload: Workload
    input_schema: Callable[[], InputSchema]  # how the archive's OIP metadata names the input
    # One input's largest answer (model, longest label, top_k): the response-size check.
    largest_answer: Callable[[str, str, int], dict[str, Any]]
    # Findings on the entry's limits against config.properties' max_request_size (where, entry, limit).
    limits: Callable[[str, Any, int], list[Problem]]
    # The optional keys of its models= entry in config.properties that only its worker reads.
    worker_keys: tuple[WorkerKey, ...] = ()
    # The kind's own modules its handler imports (package folders or files), staged beside
    # the handler and batchkit in every archive: how a kind from another package ships its
    # decoding, config and errors to the worker.
    handler_modules: tuple[Path, ...] = ()

    @property
    def all_worker_keys(self) -> tuple[WorkerKey, ...]:
        """Every optional models= key its worker reads: those of every worker (the deadline
        budget), then its own."""
        return (*SHARED_WORKER_KEYS, *self.worker_keys)

    def handler_config(self, model: str, entry: Common, resolved: Mapping[str, Any]) -> dict[str, Any]:
        """The archive's handler config: the entry's handler keys and what the export
        ``resolved`` (the gates' record included), checked by the worker's own config type,
        so a key it does not know or lacks fails the build. Packaging adds torch_threads."""
        values = {
            "model_name": model,
            "model_file": artifacts.MODEL_FILE,
            "labels_file": artifacts.LABELS_FILE,
            **handler_values(entry),
            **resolved,
        }
        mapping = to_mapping(from_mapping(self.config, values))
        mapping.pop("torch_threads")
        return mapping


# The entry-point group every kind registers its Kind record in (pyproject.toml).
KINDS_GROUP = "tsbatch.kinds"


class KindError(ValueError):
    """A kind that is not installed, or an entry point that is not a kind."""


def load_kinds(points: Iterable[EntryPoint]) -> dict[str, Kind]:
    """The Kind record of each entry point, by its name (which must be the record's)."""
    kinds: dict[str, Kind] = {}
    for point in points:
        kind = point.load()
        if not isinstance(kind, Kind):
            raise KindError(f"entry point {point.name} = {point.value} ({KINDS_GROUP}) is not a Kind record")
        if kind.name != point.name:
            raise KindError(f"entry point {point.name} = {point.value} names kind {kind.name!r}")
        kinds[point.name] = kind
    return kinds


@functools.cache
def installed_kinds() -> dict[str, Kind]:
    """Every kind the installed packages register (once per process)."""
    kinds = load_kinds(entry_points(group=KINDS_GROUP))
    if not kinds:
        raise KindError(
            f"no model kind is installed (entry-point group {KINDS_GROUP}): install the toolkit "
            "(`make install`), whose package metadata registers them"
        )
    return kinds
