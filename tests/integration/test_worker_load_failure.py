"""A worker that cannot load its handler ends the wait at once, saying why: the server
start raises with the worker's exception line, and the tuner stops in seconds instead of
waiting out every point (its servers start the same way as `tsbatch serve` and the benches)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.support import private_port_entries
from tsbatch.paths import REPO_ROOT
from tsbatch.server.process import TorchServe, WorkerLoadError

ARCHIVER = Path(sys.executable).parent / "torch-model-archiver"
MODEL = "needs_a_package"
HANDLER = '''"""A handler importing a package the server lacks, as a user's archive may."""
import package_the_server_lacks  # noqa: F401


def handle(data, context):
    return [{"ok": True} for _ in data or []]
'''
MISSING = "ModuleNotFoundError: No module named 'package_the_server_lacks'"


@pytest.fixture(scope="module")
def broken_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("broken-archive")
    handler = work / "needs_a_package_handler.py"
    handler.write_text(HANDLER)
    store = work / "model-store"
    store.mkdir()
    command = [str(ARCHIVER), "--model-name", MODEL, "--version", "1.0", "--handler", str(handler),
               "--export-path", str(store)]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, env={**os.environ, "TMPDIR": str(work)})
    return store / f"{MODEL}.mar"


def test_the_start_stops_at_the_first_death_with_its_exception(broken_archive: Path, tmp_path: Path) -> None:
    properties = tmp_path / "config.properties"
    entries = {**private_port_entries(), "load_models": f"{MODEL}.mar"}
    properties.write_text("".join(f"{key}={value}\n" for key, value in entries.items()))
    server = TorchServe(run_dir=tmp_path, properties_path=properties, model_store=broken_archive.parent)
    started = time.monotonic()
    with pytest.raises(WorkerLoadError) as failed:
        server.start([MODEL], timeout=180)
    assert time.monotonic() - started < 60, "the wait ended at the death, not at its timeout"
    assert failed.value.failure.exception == MISSING
    assert str(failed.value).startswith(f"a worker of {MODEL} died while loading: {MISSING}")


def test_the_tuner_stops_when_every_point_fails_the_same_way(broken_archive: Path, tmp_path: Path) -> None:
    requests_dir = tmp_path / "requests"
    requests_dir.mkdir()
    (requests_dir / "one.json").write_text('{"values": [1, 2]}')
    command = [sys.executable, "-m", "tsbatch", "tune", "--mar", str(broken_archive), "--requests",
               str(requests_dir), "--quick", "--p99-ms", "2000", "--out", str(tmp_path / "tune")]  # fmt: skip
    started = time.monotonic()
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    seconds = time.monotonic() - started
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    assert seconds < 60, f"took {seconds:.0f} s\n{output[-3000:]}"
    assert MISSING in output and "every point would fail the same way" in output, output[-3000:]
