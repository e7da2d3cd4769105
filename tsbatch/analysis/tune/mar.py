"""Any model archive (``.mar``), built by the toolkit or not: read what it is, and repackage
it with other batch settings.

TorchServe lets the archive's ``model-config.yaml`` win over ``config.properties``, so
trying a batchSize x maxBatchDelay x workers point on someone else's archive means
rewriting that file inside it: every other entry (the handler, the model file, extra files)
is copied as it is, and an archive without a config file gets one, named in its
``MAR-INF/MANIFEST.json`` where TorchServe looks for it.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from image_serving.pool import decode_threads_problem
from tsbatch.settings.batch import BATCH_KEYS, BatchSettings

MANIFEST_ENTRY = "MAR-INF/MANIFEST.json"
DEFAULT_CONFIG_FILE = "model-config.yaml"
TOOLKIT_LIBRARY = "batchkit/"  # every archive the toolkit builds carries its handler library


class MarError(ValueError):
    """The file is not a model archive this module can read or rewrite."""


@dataclass(frozen=True)
class MarInfo:
    """What an archive says about itself."""

    path: Path
    model: str
    version: str
    config_file: str | None  # the model-config.yaml entry named in the manifest, if any
    config: dict[str, Any]  # its content ({} without one)
    toolkit_built: bool

    @property
    def entry(self) -> dict[str, Any]:
        """Its batch settings as a ``models=`` entry spells them (only those it sets)."""
        return {key: self.config[key] for key in BATCH_KEYS if key in self.config}

    @property
    def settings(self) -> BatchSettings:
        """Its batch settings, a key it leaves out taking what TorchServe would serve."""
        return BatchSettings.configured({}, self.model, self.entry)

    @property
    def decode_threads(self) -> int | str | None:
        """The decode pool of a toolkit image archive's worker: a size or auto (None: no such pool)."""
        handler = self.config.get("handler")
        threads = handler.get("decode_threads") if self.toolkit_built and isinstance(handler, dict) else None
        return None if isinstance(threads, bool) or decode_threads_problem(threads) else threads


def read_mar(path: Path) -> MarInfo:
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            manifest = json.loads(archive.read(MANIFEST_ENTRY))
            model = manifest["model"]
            config_file = model.get("configFile")
            config = yaml.safe_load(archive.read(config_file)) if config_file in names else {}
    except (OSError, zipfile.BadZipFile, KeyError, ValueError, yaml.YAMLError) as exc:
        raise MarError(
            f"{path}: not a readable TorchServe model archive ({type(exc).__name__}: {exc})"
        ) from None
    if not isinstance(config, dict) or "modelName" not in model:
        raise MarError(f"{path}: its manifest names no model, or its {config_file} is not a mapping")
    return MarInfo(
        path,
        str(model["modelName"]),
        str(model.get("modelVersion", "1.0")),
        config_file,
        config,
        any(name.startswith(TOOLKIT_LIBRARY) for name in names),
    )


def repackage(info: MarInfo, archive: Path, settings: dict[str, Any]) -> Path:
    """``archive``: the archive with ``settings`` written over its model-config.yaml's."""
    config_file = info.config_file or DEFAULT_CONFIG_FILE
    config = {**info.config, **settings}
    archive.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(info.path) as source, zipfile.ZipFile(archive, "w") as out:
        manifest = json.loads(source.read(MANIFEST_ENTRY))
        manifest["model"]["configFile"] = config_file
        for entry in source.infolist():
            if entry.filename not in (MANIFEST_ENTRY, config_file):
                # Stored: this copy lives for one point, and deflating the weights again
                # would cost seconds of every point.
                out.writestr(entry, source.read(entry), compress_type=zipfile.ZIP_STORED)
        out.writestr(MANIFEST_ENTRY, json.dumps(manifest, indent=4))
        out.writestr(config_file, yaml.safe_dump(config, sort_keys=False))
    return archive


def models_entry_base(info: MarInfo) -> str:
    """A ``config.properties`` holding only this archive's ``models=`` entry, without settings:
    the tuner writes the winner into it (the printed entry then names this model alone)."""
    document = {info.model: {info.version: {"defaultVersion": True, "marName": info.path.name}}}
    return "models=" + json.dumps(document) + "\n"
