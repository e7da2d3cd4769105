"""``tsbatch apply`` on a live TorchServe, where it is hardest: two workers computing slow
batches of camera photos under load, other models' clients watching for a stall, two applies
at once, an apply killed midway, keys that expire.

One server (resnet18 at two workers, bert_intent beside it) with model registration on
(``enable_model_api=true``, loopback, a private copy of the store, since apply stages
archives there); a second one, with keys that expire in seconds, for the key test. Applies
run as the installed command in their own process, as an operator runs them (and so their
packaging does not hold the load client's interpreter).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.conftest import StartServer
from tests.integration.support import background_load, record
from tsbatch.archive.package import private_store
from tsbatch.client.load import Record
from tsbatch.config.properties import model_settings, read_properties
from tsbatch.kinds.image.examples import photo_jpegs
from tsbatch.paths import DEFAULT_PROPERTIES, REPO_ROOT
from tsbatch.server.apply import main
from tsbatch.server.apply_lock import LOCK_NAME
from tsbatch.server.process import TorchServe
from tsbatch.settings.batch import BatchSettings

MODEL, OTHER = "resnet18", "bert_intent"
# Slow batches: 8 camera photos of 12 MP take the worker about a second to decode (longer on
# shared cores), longer than the old drain's fixed settle time.
PHOTO, BATCH, CLIENTS = (4032, 3024), 8, 16
# A client of another model never waits this long for an answer during an apply; a
# synchronous register holds a frontend thread for the whole worker start (several seconds).
STALL_BOUND_S = 1.5


def apply_command(server: TorchServe, *arguments: str) -> list[str]:
    return [sys.executable, "-u", "-m", "tsbatch", "apply", "--model", MODEL,
            "--run-dir", str(server.run_dir), *arguments]  # fmt: skip


def run_apply(server: TorchServe, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(apply_command(server, *arguments), cwd=REPO_ROOT, capture_output=True, text=True)


def versions(server: TorchServe, model: str = MODEL) -> list[str]:
    return server.client.versions(model)


def served(server: TorchServe, model: str = MODEL) -> tuple[int, int, int]:
    now = server.client.describe(model)
    return now["batchSize"], now["maxBatchDelay"], now["minWorkers"]


def properties_batch_size(path: Path) -> int:
    return int(model_settings(read_properties(path))[MODEL]["batchSize"])


def staged_archives(server: TorchServe) -> list[str]:
    return sorted(path.name for path in server.model_store.glob(f"{MODEL}-*"))


def failures(records: list[Record]) -> list[tuple[int, str | None, bytes]]:
    return [(r.status, r.problem, r.body[:200]) for r in records if r.status != 200]


@pytest.fixture(scope="module")
def registering_server(
    start_server: StartServer, model_store: Path, tmp_path_factory: pytest.TempPathFactory
) -> TorchServe:
    # The archive's model-config.yaml wins over config.properties: resnet18 is repackaged at two workers.
    properties, store = private_store(
        tmp_path_factory.mktemp("apply-store"),
        [MODEL, OTHER],
        changes={MODEL: BatchSettings.for_point(BATCH, 10, 2).entry()},
    )
    return start_server(
        store, models=[MODEL, OTHER], source=properties, overrides={"enable_model_api": "true"}
    )


@pytest.fixture
def properties(tmp_path: Path) -> Path:
    path = tmp_path / "config.properties"
    shutil.copy(DEFAULT_PROPERTIES, path)
    return path


@pytest.mark.serial  # its server is timed under load: run alone
def test_two_workers_with_slow_batches_under_load_fail_no_request(
    registering_server: TorchServe, properties: Path
) -> None:
    """Two applies in a row (batchSize 8 -> 7 -> 8) while 16 clients keep both old workers
    computing 12 MP photos: every request is answered 200, and each old version is
    unregistered only after its workers' last batches."""
    server = registering_server
    photos = photo_jpegs(*PHOTO, count=4)
    runs = []
    with background_load(server, MODEL, photos, clients=CLIENTS, content_type="image/jpeg") as load:
        time.sleep(3)
        for batch_size in (BATCH - 1, BATCH):
            started = time.time()
            done = run_apply(server, "--batch-size", str(batch_size), "--properties", str(properties))
            assert done.returncode == 0, done.stdout + done.stderr
            runs.append((started, time.time(), done.stdout))
        time.sleep(1)
    failed = failures(load.records)
    record(
        "apply",
        photo=f"{PHOTO[0]}x{PHOTO[1]}",
        clients=CLIENTS,
        workers=2,
        applies=len(runs),
        switch_s=[round(end - begin, 1) for begin, end, _ in runs],
        requests=len(load.records),
        failed=len(failed),
    )
    for begin, end, stdout in runs:
        assert [r for r in load.records if begin <= r.start <= end], f"load kept sending through\n{stdout}"
    assert not failed, failed[:5]
    assert versions(server) == [f"1.0.b{BATCH}d10w2"]
    assert served(server) == (BATCH, 10, 2)
    assert properties_batch_size(properties) == BATCH
    assert "# Per model (default version)." in properties.read_text(), "comments kept"
    assert staged_archives(server) == [f"{MODEL}-1.0.b{BATCH}d10w2"], "only the served one is kept"


@pytest.mark.serial  # its server is timed under load: run alone
def test_other_models_clients_do_not_stall_during_an_apply(registering_server: TorchServe) -> None:
    """Register and scale are asynchronous: no frontend thread waits for the new workers, so
    bert_intent's clients are answered as usual while resnet18's new version starts."""
    server = registering_server
    with background_load(server, OTHER, [b"turn on the lights in the kitchen"], clients=6,
                         content_type="text/plain") as load:  # fmt: skip
        time.sleep(2)
        begin = time.time()
        done = run_apply(server, "--batch-size", "6", "--no-properties")
        end = time.time()
        time.sleep(1)
    assert done.returncode == 0, done.stdout + done.stderr
    during = [r for r in load.records if r.start <= end and r.finished >= begin]
    worst_s = max((r.response_time_ms or 0) for r in during) / 1000
    record(
        "apply_stall",
        apply_s=round(end - begin, 1),
        requests=len(during),
        worst_other_model_s=round(worst_s, 3),
    )
    assert len(during) > 20 and not failures(load.records)
    assert worst_s < STALL_BOUND_S, f"a {OTHER} client waited {worst_s:.2f}s during the apply\n{done.stdout}"


@pytest.mark.serial  # its server is timed under load: run alone
def test_two_applies_at_once_one_refused_and_the_end_consistent(
    registering_server: TorchServe, properties: Path
) -> None:
    server = registering_server
    commands = [apply_command(server, "--batch-size", size, "--properties", str(properties)) for size in "25"]
    processes = [
        subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for command in commands
    ]
    outcomes = [(process.wait(timeout=600), *process.communicate()) for process in processes]
    codes = sorted(code for code, _, _ in outcomes)
    assert codes == [0, 1], outcomes
    refused = next(err for code, _, err in outcomes if code == 1)
    assert "another apply holds" in refused and "pid " in refused, refused
    (batch_size, _, _), [version] = served(server), versions(server)
    assert batch_size in (2, 5) and version == f"1.0.b{batch_size}d10w2"
    assert properties_batch_size(properties) == batch_size, "config.properties says what is served"
    assert staged_archives(server) == [f"{MODEL}-{version}"]


@pytest.mark.serial  # its server is timed under load: run alone
def test_an_apply_killed_after_its_switch_is_finished_by_the_next(
    registering_server: TorchServe, properties: Path
) -> None:
    """Killed between set-default and the unregister: two versions registered. The next apply
    (asking for what is now served) drains and unregisters the old one, removes its archive
    and writes config.properties."""
    server = registering_server
    old = versions(server)[0]
    process = subprocess.Popen(
        apply_command(server, "--batch-size", "3", "--no-properties"),
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    for line in process.stdout:
        if "set_default:" in line:
            os.kill(process.pid, signal.SIGKILL)
            break
    process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL, "killed midway"
    assert sorted(versions(server)) == sorted([old, "1.0.b3d10w2"])
    assert json.loads((server.run_dir / LOCK_NAME).read_text())["finished"] is False
    done = run_apply(server, "--batch-size", "3", "--properties", str(properties))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "did not finish" in done.stdout and "already served" in done.stdout
    assert versions(server) == ["1.0.b3d10w2"]
    assert staged_archives(server) == [f"{MODEL}-1.0.b3d10w2"]
    assert properties_batch_size(properties) == 3


@pytest.mark.serial  # its server is timed under load: run alone
def test_more_workers_scale_in_place_under_load(registering_server: TorchServe) -> None:
    server = registering_server
    version = server.client.describe(OTHER)["modelVersion"]
    with background_load(server, OTHER, [b"play some jazz"], clients=2, content_type="text/plain") as load:
        time.sleep(1)
        code = main(["--model", OTHER, "--workers", "2", "--run-dir", str(server.run_dir), "--no-properties"])
    assert code == 0
    assert load.records and not failures(load.records)
    now = server.client.describe(OTHER)
    assert (now["modelVersion"], now["minWorkers"], now["maxWorkers"]) == (version, 2, 2), (
        "same version, scaled"
    )
    assert sum(1 for worker in now["workers"] if worker["status"] == "READY") == 2


@pytest.mark.serial  # its server is timed under load: run alone
def test_a_wrong_key_is_refused_and_changes_nothing(
    registering_server: TorchServe, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copy(registering_server.properties_path, run_dir / "config.properties")
    keys = json.loads(registering_server.key_file.read_text())
    keys["management"]["key"] = "not-the-key"
    (run_dir / "key_file.json").write_text(json.dumps(keys))
    before = served(registering_server)
    assert main(["--model", MODEL, "--batch-size", "2", "--run-dir", str(run_dir), "--no-properties"]) == 1
    assert "refused the key" in capsys.readouterr().err
    assert served(registering_server) == before


def test_model_api_off_is_refused_and_changes_nothing(
    torchserve: TorchServe, capsys: pytest.CaptureFixture[str]
) -> None:
    before = served(torchserve)
    code = main(
        ["--model", MODEL, "--batch-size", "2", "--run-dir", str(torchserve.run_dir), "--no-properties"]
    )
    assert code == 1
    assert "enable_model_api=true" in capsys.readouterr().err
    assert served(torchserve) == before


def test_expired_keys_are_refreshed_and_a_foreign_api_key_named(
    start_server: StartServer,
    model_store: Path,
    tmp_path_factory: pytest.TempPathFactory,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Keys that expire after 6 s: by the time apply runs both have, and more expire while it
    packages; it refreshes them (the API key does not expire) and succeeds. With a key file
    whose API key is not the server's, it says so."""
    store = tmp_path_factory.mktemp("expiring-store")
    shutil.copy(model_store / f"{MODEL}.mar", store)
    server = start_server(
        store, models=[MODEL], overrides={"enable_model_api": "true", "token_expiration_min": "0.1"}
    )
    stale = json.loads(server.key_file.read_text())
    time.sleep(7)
    assert server.keys.expired("management") and server.keys.expired("inference")

    foreign = tmp_path / "run"
    foreign.mkdir()
    shutil.copy(server.properties_path, foreign / "config.properties")
    (foreign / "key_file.json").write_text(json.dumps({**stale, "API": {"key": "not-the-api-key"}}))
    assert main(["--model", MODEL, "--batch-size", "4", "--run-dir", str(foreign), "--no-properties"]) == 1
    assert "refused to refresh" in capsys.readouterr().err

    assert (
        main(["--model", MODEL, "--batch-size", "4", "--run-dir", str(server.run_dir), "--no-properties"])
        == 0
    )
    fresh = json.loads(server.key_file.read_text())
    assert fresh["management"]["key"] != stale["management"]["key"]
    assert fresh["inference"]["key"] != stale["inference"]["key"], "the probe needed a fresh inference key"
    assert served(server)[0] == 4
