"""Real TorchServe instances for integration tests.

Archives come from ``make archive`` (``build/`` and ``model-store/``), built here when
missing. Every instance runs on free loopback ports with token auth on, in its own run
directory, and is stopped in ``finally`` whatever the test did.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import pytest

from tsbatch.archive.manifest import load_manifest
from tsbatch.archive.plugins import build_all
from tsbatch.environment import ALLOW_DIGITS_ENV
from tsbatch.paths import REPO_ROOT
from tsbatch.server.process import TorchServe, start_instance

INTEGRATION_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under tests/integration, so ``-m "not integration"`` is the fast suite."""
    for item in items:
        if INTEGRATION_DIR in item.path.parents:
            item.add_marker(pytest.mark.integration)


@contextlib.contextmanager
def one_process_at_a_time(name: str) -> Iterator[None]:
    """Held by one test process at a time (``make test`` runs several, pytest-xdist): what
    they build into the repository (archives, plugin jars) is built once, never twice at once."""
    lock = REPO_ROOT / "build" / f".{name}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _require_java() -> None:
    if shutil.which("java") is None:
        pytest.fail("Java 17 is required for integration tests (run `make java`)")


@pytest.fixture(scope="session")
def model_store() -> Path:
    """The repository's model store, with every manifest model built (export if missing).

    Each missing model is built on its own, so one model's failed build fails only the
    tests that serve it (``start_server`` checks that the archives it needs exist). Built
    as `make archive` builds: the offline digits placeholder is allowed.
    """
    manifest = load_manifest()
    env = {ALLOW_DIGITS_ENV: "1", **os.environ}
    with one_process_at_a_time("model-store"):
        for name in manifest.models:
            if not (manifest.model_store / f"{name}.mar").exists():
                subprocess.run(
                    [sys.executable, "-m", "tsbatch", "archive", "--model", name], cwd=REPO_ROOT, env=env
                )
    return manifest.model_store


StartServer = Callable[..., TorchServe]


class Servers:
    """The instances the session started: each module's are stopped when the module ends (in
    the background, so the next module starts at once), the shared one at the session's end."""

    def __init__(self) -> None:
        self.started: list[TorchServe] = []
        self.shared: list[TorchServe] = []
        self.stopping = ThreadPoolExecutor(max_workers=4)
        self.pending: list[Future[None]] = []

    def stop_all_but_shared(self) -> None:
        shared = {id(server) for server in self.shared}
        done = [server for server in self.started if id(server) not in shared]
        self.started = [server for server in self.started if id(server) in shared]
        self.pending += [self.stopping.submit(server.stop) for server in done]

    def wait_for_stops(self) -> None:
        wait(self.pending)
        self.pending.clear()

    def stop_all(self) -> None:
        """Each stop waits for its process group to exit: all at once, not one after another."""
        self.shared.clear()
        self.stop_all_but_shared()
        self.stopping.shutdown(wait=True)


@pytest.fixture(scope="session")
def servers() -> Iterator[Servers]:
    started = Servers()
    try:
        yield started
    finally:
        started.stop_all()


@pytest.fixture(scope="module", autouse=True)
def stop_the_module_s_servers(servers: Servers, request: pytest.FixtureRequest) -> Iterator[None]:
    """An idle server left running still costs memory and CPU (TorchServe's metrics
    collection) to the modules after it, and to the ones running beside it. A module with
    timed (``serial``) tests starts once the servers before it have stopped."""
    mine = [item for item in request.session.items if item.module is request.module]
    if any(item.get_closest_marker("serial") for item in mine):
        servers.wait_for_stops()
    yield
    servers.stop_all_but_shared()


@pytest.fixture(scope="session")
def start_server(servers: Servers, tmp_path_factory: pytest.TempPathFactory) -> StartServer:
    """Factory: ``start_server(model_store, models=[...], overrides={...}, source=...)``.

    Other batch settings need archives packaged with them: ``package.private_store`` gives a
    config and a store to pass as ``source`` and ``model_store``.

    Every instance it starts is stopped at the end of its test module (the shared
    ``torchserve`` at the end of the session), or earlier with ``server.stop()``.
    """
    _require_java()
    with one_process_at_a_time("plugins"):
        build_all()  # the frontend plugins config.properties' plugins_path names (a no-op when built)

    def start(model_store: Path, models: list[str] | None = None, **options: Any) -> TorchServe:
        names = models if models is not None else list(load_manifest().models)
        missing = [name for name in names if not (model_store / f"{name}.mar").exists()]
        if missing:
            pytest.fail(f"no archive for {missing} in {model_store}: its build failed (see output above)")
        run_dir = tmp_path_factory.mktemp("torchserve")
        server = start_instance(run_dir, model_store, models, **options)
        servers.started.append(server)
        return server

    return start


@pytest.fixture(scope="session")
def torchserve(servers: Servers, start_server: StartServer, model_store: Path) -> TorchServe:
    """One shared instance serving every model with the settings of config.properties."""
    server = start_server(model_store)
    servers.shared.append(server)
    return server
