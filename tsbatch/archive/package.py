"""Package an exported model into ``model-store/<name>.mar`` with torch-model-archiver.

The archive's ``model-config.yaml`` carries the batch settings read from
``config.properties`` (TorchServe lets the archive's values win, so they must be the
same), plus the handler's typed config. The shared ``batchkit`` package, the kind's own
handler modules, labels, build info and any tokenizer files travel inside the archive.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from batchkit.config import from_mapping, to_mapping
from batchkit.protocols import v2_metadata
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import Manifest, ModelSpec, load_manifest, parse_manifest_command
from tsbatch.archive.schema import SERVING_KEYS
from tsbatch.config.properties import (
    configured_settings,
    model_settings,
    read_properties,
    replace_entry,
    update_model_settings,
)
from tsbatch.paths import DEFAULT_PROPERTIES, HANDLERS_DIR
from tsbatch.settings.batch import (
    BATCH_KEYS,
    QUEUE_KEY,
    BatchSettings,
    SettingsError,
    WorkerKey,
    defaults_for,
)

MODEL_CONFIG_FILE = "model-config.yaml"
# Read by the Open Inference Protocol plugin (plugins/oip) for GET /v2/models/<m>.
OIP_METADATA_FILE = "oip_metadata.json"


class PackageError(RuntimeError):
    """The archive could not be built."""


def archive_settings(
    properties_path: Path, model_name: str, worker_keys: Sequence[WorkerKey] = ()
) -> BatchSettings:
    """The settings of one model in config.properties that the archive must repeat (with the
    ``worker_keys`` of its kind it sets); each key left out takes TorchServe's default, said here."""
    properties = read_properties(properties_path)
    try:
        settings = configured_settings(properties, model_name, worker_keys)
    except SettingsError as exc:
        raise PackageError(f"{properties_path}: {exc}") from None
    for default in defaults_for(properties, model_settings(properties)[model_name]):
        print(f"[package] {model_name}: models= {default.describe()}")
    return settings


def model_config(spec: ModelSpec, settings: BatchSettings) -> dict[str, Any]:
    """The archive's model-config.yaml: the batch settings and queue size, and the export's
    handler config with the threads, the decode settings, the deadline budget and the
    serving-time keys, as the worker's config type reads it."""
    exported = artifacts.read_json(spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE)
    exported["torch_threads"] = settings.torch_threads
    exported.update(
        {
            k.field: value
            for k in spec.kind.all_worker_keys
            if (value := settings.worker_key(k.name)) is not None
        }
    )
    exported.update(spec.config.model_dump(include=set(SERVING_KEYS)))
    handler = to_mapping(from_mapping(spec.kind.config, exported))
    entry = settings.entry()
    config = {key: entry[key] for key in (*BATCH_KEYS, QUEUE_KEY) if key in entry}
    config["handler"] = handler
    return config


def handler_sources(spec: ModelSpec) -> list[Path]:
    """The code an archive carries: batchkit and the toolkit's handlers, the model's handler
    file and its kind's own handler modules."""
    sources = [*HANDLERS_DIR.rglob("*.py"), spec.handler]
    for module in spec.kind.handler_modules:
        sources.extend(module.rglob("*.py") if module.is_dir() else [module])
    return sorted(set(sources))


def stamp_for(spec: ModelSpec, config: dict[str, Any]) -> str:
    """What the archive was built from: its config and the artifact and handler digests."""
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode())
    for path in sorted(spec.artifact_dir.rglob("*")) + handler_sources(spec):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.name.encode())
            digest.update(artifacts.file_digest(path).encode())
    return digest.hexdigest()[:16]


def stage_extra_files(spec: ModelSpec, staging: Path) -> None:
    """Lay out what goes beside the handler in the archive (torch-model-archiver copies
    the *contents* of a directory given as an extra file)."""
    staging.mkdir(parents=True)
    no_cache = shutil.ignore_patterns("__pycache__")
    shutil.copytree(HANDLERS_DIR / "batchkit", staging / "batchkit", ignore=no_cache)
    for module in spec.kind.handler_modules:  # a kind's own decoding, config and errors
        if module.is_dir():
            shutil.copytree(module, staging / module.name, ignore=no_cache)
        else:
            shutil.copy2(module, staging / module.name)
    artifacts.write_json(staging / OIP_METADATA_FILE, v2_metadata(spec.kind.input_schema()))
    skip = {artifacts.MODEL_FILE, artifacts.HANDLER_CONFIG_FILE}
    for path in spec.artifact_dir.iterdir():
        if path.name in skip:
            continue
        if path.is_dir():
            shutil.copytree(path, staging / path.name)
        else:
            shutil.copy2(path, staging / path.name)


def package(
    spec: ModelSpec, manifest: Manifest, properties_path: Path = DEFAULT_PROPERTIES, force: bool = False
) -> Path:
    """Build ``<model store>/<name>.mar`` unless the one there was built from the same inputs."""
    if not (spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE).exists():
        raise PackageError(f"{spec.name}: no exported model in {spec.artifact_dir}; run the export first")
    settings = archive_settings(properties_path, spec.name, spec.kind.all_worker_keys)
    config = model_config(spec, settings)
    # No TorchScript (an exported program that does not trace into one): the packages,
    # staged with the other files, are the model; TorchServe needs no serialized file.
    torchscript = config["handler"]["model_file"]
    serialized = ["--serialized-file", str(spec.artifact_dir / torchscript)] if torchscript else []
    stamp = stamp_for(spec, config)
    mar_path = manifest.model_store / f"{spec.name}.mar"
    stamp_path = manifest.model_store / f".{spec.name}.stamp.json"  # per store: stores can differ
    up_to_date = (
        mar_path.exists() and stamp_path.exists() and artifacts.read_json(stamp_path).get("stamp") == stamp
    )
    if up_to_date and not force:
        print(f"[package] {mar_path.name} is up to date")
        return mar_path
    manifest.model_store.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"package-{spec.name}-") as workdir:
        config_path = Path(workdir) / MODEL_CONFIG_FILE
        config_path.write_text(
            "# Written by tsbatch/archive/package.py from config.properties and the export's handler\n"
            "# config. Do not edit: change config.properties and run `make archive`.\n"
            + yaml.safe_dump(config, sort_keys=False)
        )
        staging = Path(workdir) / "extra"
        stage_extra_files(spec, staging)
        command = [
            str(Path(sys.executable).parent / "torch-model-archiver"),
            "--model-name", spec.name,
            "--version", spec.version,
            *serialized,
            "--handler", str(spec.handler),
            "--extra-files", str(staging),
            "--config-file", str(config_path),
            "--export-path", str(manifest.model_store),
            "--force",
            # Stored, not deflated: weights barely compress (82 MB -> 70 MB for resnet18)
            # and deflating them took 3.7 s of every packaging; stored, 0.3 s.
            "--archive-format", "zip-store",
        ]  # fmt: skip
        # The archiver stages every file in $TMPDIR/<model name> and deletes it after: two
        # packagings of one model at once (the tuner, tests, another checkout) would share
        # that folder, so each gets its own.
        private_tmp = {**os.environ, "TMPDIR": workdir}
        result = subprocess.run(command, capture_output=True, text=True, env=private_tmp)
    if result.returncode != 0:
        raise PackageError(f"torch-model-archiver failed for {spec.name}:\n{result.stderr}{result.stdout}")
    entry = settings.entry()
    artifacts.write_json(stamp_path, {"stamp": stamp, "settings": entry})
    print(
        f"[package] {mar_path} (batchSize={settings.batch_size}, "
        f"maxBatchDelay={settings.max_batch_delay_ms}, workers={settings.min_workers}-"
        f"{settings.max_workers}, torchThreads={settings.torch_threads}"
        + "".join(
            f", {key}={entry[key]}"
            for key in (*(k.name for k in spec.kind.all_worker_keys), QUEUE_KEY)
            if key in entry
        )
        + ")"
    )
    return mar_path


def private_store(
    directory: Path,
    models: list[str],
    changes: dict[str, dict[str, Any]] | None = None,
    extra_properties: dict[str, str] | None = None,
    source: Path = DEFAULT_PROPERTIES,
    manifest: Manifest | None = None,
) -> tuple[Path, Path]:
    """A copy of config.properties with some models' settings changed, and a model store
    with those models packaged to match (for benchmarks, the tuner and tests).

    TorchServe lets the archive's model-config.yaml win over config.properties, so trying
    other batch settings means repackaging: seconds, from the already exported artifacts.
    Returns (properties path, model store).
    """
    repo = manifest or load_manifest()
    directory.mkdir(parents=True, exist_ok=True)
    properties = directory / "config.properties"
    shutil.copy(source, properties)
    values = read_properties(source)
    metrics_config = values.get("metrics_config")
    if metrics_config and not Path(metrics_config).is_absolute():
        shutil.copy(source.parent / metrics_config, directory / metrics_config)
    plugins = values.get("plugins_path")
    store = directory / "model-store"
    store.mkdir(exist_ok=True)
    text = properties.read_text()
    for key, value in {
        "load_models": ",".join(f"{m}.mar" for m in models),
        # The frontend plugins stay where the source names them (they are not copied).
        **({"plugins_path": str((source.parent / plugins).resolve())} if plugins else {}),
        **(extra_properties or {}),
    }.items():
        text = replace_entry(text, key, f"{key}={value}\n")
    properties.write_text(text)
    for model, settings in (changes or {}).items():
        update_model_settings(properties, model, settings)
    private = Manifest(models=repo.models, build_dir=repo.build_dir, model_store=store)
    for model in models:
        package(repo.model(model), private, properties, force=True)
    return properties, store


def main(argv: list[str] | None = None) -> int:
    args, manifest, names = parse_manifest_command(
        "Package exported models into model-store/ with the batch settings of config.properties "
        "(seconds; run `tsbatch archive` first when nothing is exported).",
        argv,
        "--force",
    )
    try:
        for name in names:
            package(manifest.model(name), manifest, args.properties, args.force)
    except (PackageError, ValueError) as exc:
        print(f"[package] FAILED: {exc}", file=sys.stderr)
        return 1
    return 0
