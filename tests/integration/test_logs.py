"""TorchServe's logs stay bounded (log4j2.xml, named by config.properties' vmargs): with a
tiny cap, enough requests to roll every busy log over several times leave the log folder
under the cap, and at the shipped settings a request writes a few hundred bytes, once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.support import record
from tests.integration.test_resnet_serving import digit_png
from tsbatch.paths import REPO_ROOT
from tsbatch.server.process import TorchServe

MODEL = "resnet18"
FILE_KB = 16
OLD_FILES = 1
LOGS = 5  # access_log, model_log, model_metrics, ts_log, ts_metrics


def logged_bytes(server: TorchServe) -> int:
    files = [*(server.run_dir / "logs").glob("*"), server.run_dir / "torchserve.out"]
    return sum(path.stat().st_size for path in files if path.is_file())


def send(server: TorchServe, count: int) -> None:
    body = digit_png(4, 32)
    for _ in range(count):
        assert server.client.predict(MODEL, body, "image/png").status_code == 200


@pytest.fixture(scope="module")
def capped(start_server, model_store: Path) -> TorchServe:
    vmargs = (
        f"-Dlog4j.configurationFile={REPO_ROOT / 'log4j2.xml'} "
        f"-Dtsbatch.log.fileSize={FILE_KB}KB -Dtsbatch.log.files={OLD_FILES}"
    )
    return start_server(model_store, [MODEL], overrides={"vmargs": vmargs})


def test_the_shipped_logs_write_little_per_request_and_no_debug(torchserve: TorchServe) -> None:
    """The session's shared instance runs the shipped settings; only this test's requests
    reach it while it counts."""
    server = torchserve
    send(server, 5)
    before = logged_bytes(server)
    send(server, 200)
    per_request = (logged_bytes(server) - before) / 200
    ts_log = (server.run_dir / "logs" / "ts_log.log").read_text()
    record("log_bytes", bytes_per_request=round(per_request))
    print(f"\n[logs] {per_request:.0f} bytes logged per request at the shipped settings")
    assert "[DEBUG]" not in ts_log
    assert per_request < 1500, per_request


def test_the_log_cap_holds_through_rollovers(capped: TorchServe) -> None:
    send(capped, 600)
    logs = capped.run_dir / "logs"
    rolled = sorted(path.name for path in logs.glob("*.1.log.gz"))
    total = logged_bytes(capped)
    cap = LOGS * (OLD_FILES + 1) * FILE_KB * 1024
    print(f"\n[logs] {total} bytes in {logs} after 600 requests (cap {cap}); rolled over: {rolled}")
    assert rolled, "no log rolled over: send more requests or lower the size"
    assert not list(logs.glob("*.2.log.gz")), "more old files kept than asked"
    assert total < cap * 1.1
