"""The container's start: prepare the store from the given config, then supervise TorchServe."""

from __future__ import annotations

import sys

from tsbatch.archive.package import PackageError
from tsbatch.container.drain import DrainSettings, supervise
from tsbatch.container.startup import StartupError, kserve_storage, prepare
from tsbatch.environment import Environment


def main(argv: list[str] | None = None) -> int:
    command = list(sys.argv[1:] if argv is None else argv)
    if not command:
        print(
            "usage: start.py torchserve --start --foreground --model-store DIR --ts-config FILE",
            file=sys.stderr,
        )
        return 2
    try:
        environment = Environment.read()
        store = environment.writable_store
        downloaded = kserve_storage(command, environment)
        command = prepare(downloaded, store, repackage=downloaded == command)
    except (StartupError, PackageError, ValueError) as exc:  # EnvironmentSettingError is a ValueError
        print(f"[start] {exc}", file=sys.stderr)
        return 1
    return supervise(command, DrainSettings.from_environment())
