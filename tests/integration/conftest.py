"""Real TorchServe instances for integration tests.

Archives come from ``make archive`` (``build/`` and ``model-store/``), built here when
missing. Every instance runs on free loopback ports with token auth on, in its own run
directory, and is stopped in ``finally`` whatever the test did.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from scripts import REPO_ROOT
from scripts.manifest import load_manifest
from scripts.torchserve_runner import TorchServe, start_instance

pytestmark = pytest.mark.integration


def _require_java() -> None:
    if shutil.which("java") is None:
        pytest.fail("Java 17 is required for integration tests (run `make java`)")


@pytest.fixture(scope="session")
def model_store() -> Path:
    """The repository's model store, with every manifest model built (export if missing)."""
    manifest = load_manifest()
    missing = [name for name in manifest.models if not (manifest.model_store / f"{name}.mar").exists()]
    if missing:
        result = subprocess.run([sys.executable, "-m", "scripts.build"], cwd=REPO_ROOT)
        assert result.returncode == 0, "building the archives failed (see output above)"
    return manifest.model_store


StartServer = Callable[..., TorchServe]


@pytest.fixture(scope="session")
def start_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartServer]:
    """Factory: ``start_server(model_store, models=[...], overrides={...}, model_overrides={...})``.

    Every instance it starts is stopped at the end of the session, or earlier with
    ``server.stop()``.
    """
    _require_java()
    started: list[TorchServe] = []

    def start(model_store: Path, models: list[str] | None = None, **options: Any) -> TorchServe:
        run_dir = tmp_path_factory.mktemp("torchserve")
        server = start_instance(run_dir, model_store, models, **options)
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


@pytest.fixture(scope="session")
def torchserve(start_server: StartServer, model_store: Path) -> TorchServe:
    """One shared instance serving every model with the settings of config.properties."""
    return start_server(model_store)
