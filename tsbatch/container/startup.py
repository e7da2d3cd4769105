"""A config.properties given to the container wins over the archives baked into the image.

TorchServe lets each .mar's model-config.yaml override config.properties' batch settings,
so a ConfigMap mounted over the image's config would change nothing. At container start
the archives are therefore checked against the ``--ts-config`` file, as `make check-config`
does; where they disagree they are repackaged from the image's exported artifacts into a
writable store (seconds, no re-export: what `make serve` does), and the command is pointed
at that store. Errors in the file (the same ones `make check-config` reports) stop the
start with the messages.

KServe: a custom container that sets ``STORAGE_URI`` gets that URI downloaded by KServe's
storage initializer into ``/mnt/models`` before it starts. Then the archives come from
``/mnt/models/model-store`` (or ``/mnt/models`` itself), and ``/mnt/models/config.properties``,
when present, replaces the --ts-config (a container config: 0.0.0.0 addresses).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tsbatch.archive.manifest import Manifest, load_manifest
from tsbatch.archive.package import package
from tsbatch.config.findings import Problem
from tsbatch.config.properties import load_models, read_properties
from tsbatch.configcheck.check import check, check_archives, check_models, worker_keys
from tsbatch.environment import KSERVE_STORAGE_ENV, Environment

KSERVE_MODEL_DIR = Path("/mnt/models")


class StartupError(RuntimeError):
    """The configuration cannot be served; the message says why, ``problems`` are the
    configuration's errors when that is the reason."""

    def __init__(self, message: str, problems: list[Problem] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or []


def option(command: list[str], flag: str) -> str | None:
    """The value after ``flag`` in a command line, or None."""
    return (
        command[command.index(flag) + 1]
        if flag in command and command.index(flag) + 1 < len(command)
        else None
    )


def with_option(command: list[str], flag: str, value: str) -> list[str]:
    index = command.index(flag) + 1
    return [*command[:index], value, *command[index + 1 :]]


def kserve_storage(
    command: list[str], environment: Environment, model_dir: Path = KSERVE_MODEL_DIR
) -> list[str]:
    """The command pointed at what KServe's storage initializer downloaded, if it did."""
    if not environment.storage_uri or "--model-store" not in command:
        return command
    store = model_dir / "model-store" if (model_dir / "model-store").is_dir() else model_dir
    if not any(store.glob("*.mar")):
        raise StartupError(f"{KSERVE_STORAGE_ENV} is set but {store} holds no .mar archive")
    command = with_option(command, "--model-store", str(store))
    config = model_dir / "config.properties"
    return (
        with_option(command, "--ts-config", str(config))
        if config.is_file() and "--ts-config" in command
        else command
    )


def stale_archives(properties: Path, store: Path) -> list[Problem]:
    """Archives in ``store`` whose baked batch settings differ from the file (or are missing)."""
    keys = worker_keys(None)
    _, settings = check_models(read_properties(properties), keys)
    wanted = set(load_models(read_properties(properties)) or settings)
    return check_archives({name: entry for name, entry in settings.items() if name in wanted}, store, keys)


def prepare(
    command: list[str], writable_store: Path, manifest: Manifest | None = None, repackage: bool = True
) -> list[str]:
    """The TorchServe command to run: as given when the archives agree with its --ts-config,
    else pointed at ``writable_store`` with the archives repackaged from that file (only
    from the image's own exports: archives from elsewhere that disagree are an error)."""
    config, store = option(command, "--ts-config"), option(command, "--model-store")
    if Path(command[0]).name != "torchserve" or config is None or store is None:
        return command  # not a TorchServe start (e.g. a shell for debugging): run as given
    properties, image_store = Path(config), Path(store)
    repo = manifest or load_manifest()
    stale = stale_archives(properties, image_store)
    served_store = image_store
    if stale:
        for problem in stale:
            print(f"[start] {problem.where}: {problem.message}")
        if not repackage:
            raise StartupError(
                f"the archives in {image_store} disagree with {properties}: rebuild them with it"
            )
        print(f"[start] {properties} wins: repackaging into {writable_store}")
        served_store = writable_store
        private = replace(repo, model_store=served_store)
        for name in load_models(read_properties(properties)) or repo.models:
            package(private.model(name), private, properties)
    problems = check(properties, replace(repo, model_store=served_store), include_archives=True)
    for problem in problems:
        print(f"[start] {problem}")
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise StartupError(f"{properties}: {len(errors)} error(s) (above); not starting TorchServe", errors)
    return (
        command if served_store == image_store else with_option(command, "--model-store", str(served_store))
    )
