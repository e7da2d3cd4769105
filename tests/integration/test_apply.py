"""``tsbatch apply`` on a live TorchServe: new batch settings under steady load, no request failed.

The server has model registration on (``enable_model_api=true``, loopback, its own config and a
private copy of the store, since apply stages an archive there). Four clients keep sending
through the whole switch; every one of their requests must be answered 200.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from tests.conftest import image_bytes
from tests.integration.conftest import StartServer
from tests.integration.support import background_load, record
from tsbatch.cli.main import main
from tsbatch.config.properties import model_settings, read_properties
from tsbatch.paths import DEFAULT_PROPERTIES
from tsbatch.server.process import TorchServe

MODEL = "resnet18"


@pytest.fixture(scope="module")
def registering_server(
    start_server: StartServer, model_store: Path, tmp_path_factory: pytest.TempPathFactory
) -> TorchServe:
    store = tmp_path_factory.mktemp("apply-store")
    shutil.copy(model_store / f"{MODEL}.mar", store)
    return start_server(store, models=[MODEL], overrides={"enable_model_api": "true"})


def test_new_batch_settings_under_load_fail_no_request(
    registering_server: TorchServe, tmp_path: Path
) -> None:
    server = registering_server
    properties = tmp_path / "config.properties"
    shutil.copy(DEFAULT_PROPERTIES, properties)
    before = server.describe(MODEL)[0]
    with background_load(server, MODEL, [image_bytes(size=(32, 32))], clients=4) as load:
        time.sleep(2)
        started = time.time()
        code = main(["apply", "--model", MODEL, "--batch-size", "4", "--max-batch-delay", "25",
                     "--run-dir", str(server.run_dir), "--properties", str(properties)])  # fmt: skip
        switched = time.time()
        time.sleep(2)
    assert code == 0
    during = [r for r in load.records if started <= r.start <= switched]
    failed = [(r.status, r.problem, r.body[:200]) for r in load.records if r.status != 200]
    record(
        "apply",
        switch_s=round(switched - started, 2),
        requests=len(load.records),
        requests_during_switch=len(during),
        failed=len(failed),
    )
    assert during, "the load kept sending through the switch"
    assert not failed, failed[:5]
    versions = json.loads(
        server.session.get(
            f"{server.url('management')}/models/{MODEL}/all", headers=server.headers("management"), timeout=10
        ).text
    )
    assert [v["modelVersion"] for v in versions] == [f"{before['modelVersion']}.b4d25w1"]
    now = server.describe(MODEL)[0]
    assert (now["batchSize"], now["maxBatchDelay"], now["minWorkers"]) == (4, 25, 1)
    assert model_settings(read_properties(properties))[MODEL]["batchSize"] == 4
    assert "# Per model (default version):" in properties.read_text(), "comments kept"


def test_more_workers_scale_in_place_under_load(registering_server: TorchServe) -> None:
    server = registering_server
    version = server.describe(MODEL)[0]["modelVersion"]
    with background_load(server, MODEL, [image_bytes(size=(32, 32))], clients=2) as load:
        time.sleep(1)
        code = main(
            ["apply", "--model", MODEL, "--workers", "2", "--run-dir", str(server.run_dir), "--no-properties"]
        )
    assert code == 0
    assert load.records and all(r.status == 200 for r in load.records)
    now = server.describe(MODEL)[0]
    assert (now["modelVersion"], now["minWorkers"], now["maxWorkers"]) == (version, 2, 2), (
        "same version, scaled"
    )
    assert sum(1 for worker in now["workers"] if worker["status"] == "READY") == 2


def test_a_wrong_key_is_refused_and_changes_nothing(
    registering_server: TorchServe, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copy(registering_server.properties_path, run_dir / "config.properties")
    keys = json.loads(registering_server.key_file.read_text())
    keys["management"]["key"] = "not-the-key"
    (run_dir / "key_file.json").write_text(json.dumps(keys))
    before = registering_server.describe(MODEL)[0]
    assert (
        main(["apply", "--model", MODEL, "--batch-size", "2", "--run-dir", str(run_dir), "--no-properties"])
        == 1
    )
    assert "refused the key" in capsys.readouterr().err
    after = registering_server.describe(MODEL)[0]
    assert (after["modelVersion"], after["batchSize"]) == (before["modelVersion"], before["batchSize"])


def test_model_api_off_is_refused_and_changes_nothing(
    torchserve: TorchServe, capsys: pytest.CaptureFixture[str]
) -> None:
    before = torchserve.describe(MODEL)[0]
    code = main(
        [
            "apply",
            "--model",
            MODEL,
            "--batch-size",
            "2",
            "--run-dir",
            str(torchserve.run_dir),
            "--no-properties",
        ]
    )
    assert code == 1
    assert "enable_model_api=true" in capsys.readouterr().err
    after = torchserve.describe(MODEL)[0]
    assert (after["modelVersion"], after["batchSize"]) == (before["modelVersion"], before["batchSize"])
