"""The container's start: prepare the store from the given config, then supervise TorchServe."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tsbatch.build.package import PackageError
from tsbatch.container.drain import DrainSettings, supervise
from tsbatch.container.startup import StartupError, kserve_storage, prepare

WRITABLE_STORE_ENV = "TSBATCH_WRITABLE_STORE"


def main(argv: list[str] | None = None) -> int:
    command = list(sys.argv[1:] if argv is None else argv)
    if not command:
        print(
            "usage: start.py torchserve --start --foreground --model-store DIR --ts-config FILE",
            file=sys.stderr,
        )
        return 2
    store = Path(os.environ.get(WRITABLE_STORE_ENV, str(Path.cwd() / "model-store")))
    try:
        downloaded = kserve_storage(command, dict(os.environ))
        command = prepare(downloaded, store, repackage=downloaded == command)
    except (StartupError, PackageError, ValueError) as exc:
        print(f"[start] {exc}", file=sys.stderr)
        return 1
    return supervise(command, DrainSettings.from_environment())
