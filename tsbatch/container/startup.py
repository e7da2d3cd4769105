"""A config.properties given to the container wins over the archives baked into the image.

TorchServe lets each .mar's model-config.yaml override config.properties' batch settings,
so a ConfigMap mounted over the image's config would change nothing. At container start
the archives are therefore checked against the ``--ts-config`` file, as `make check-config`
does; where they disagree they are repackaged from the image's exported artifacts into a
writable store (seconds, no re-export: what `make serve` does), and the command is pointed
at that store. Errors in the file (the same ones `make check-config` reports) stop the
start with the messages.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tsbatch.build.manifest import Manifest, load_manifest
from tsbatch.build.package import package
from tsbatch.config.check import Problem, check, check_archives, check_models
from tsbatch.config.properties import read_properties


class StartupError(RuntimeError):
    """The configuration cannot be served; the message lists why."""


def option(command: list[str], flag: str) -> str | None:
    """The value after ``flag`` in a command line, or None."""
    return (
        command[command.index(flag) + 1]
        if flag in command and command.index(flag) + 1 < len(command)
        else None
    )


def loaded_models(properties: Path) -> list[str]:
    return [
        m.strip().removesuffix(".mar")
        for m in read_properties(properties).get("load_models", "").split(",")
        if m.strip() and m.strip().lower() != "all"
    ]


def stale_archives(properties: Path, store: Path) -> list[Problem]:
    """Archives in ``store`` whose baked batch settings differ from the file (or are missing)."""
    _, settings = check_models(read_properties(properties))
    wanted = set(loaded_models(properties)) or set(settings)
    return check_archives({name: entry for name, entry in settings.items() if name in wanted}, store)


def prepare(command: list[str], writable_store: Path, manifest: Manifest | None = None) -> list[str]:
    """The TorchServe command to run: as given when the archives agree with its --ts-config,
    else pointed at ``writable_store`` with the archives repackaged from that file."""
    config, store = option(command, "--ts-config"), option(command, "--model-store")
    if Path(command[0]).name != "torchserve" or config is None or store is None:
        return command  # not a TorchServe start (e.g. a shell for debugging): run as given
    properties, image_store = Path(config), Path(store)
    repo = manifest or load_manifest()
    stale = stale_archives(properties, image_store)
    target = image_store
    if stale:
        for problem in stale:
            print(f"[start] {problem}")
        print(f"[start] {properties} wins: repackaging into {writable_store}")
        target = writable_store
        private = replace(repo, model_store=target)
        for name in loaded_models(properties):
            package(private.model(name), private, properties)
    problems = check(properties, replace(repo, model_store=target), include_archives=True)
    for problem in problems:
        print(f"[start] {problem}")
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise StartupError(f"{properties}: {len(errors)} error(s) (above); not starting TorchServe")
    if target == image_store:
        return command
    index = command.index("--model-store") + 1
    return [*command[:index], str(target), *command[index + 1 :]]
