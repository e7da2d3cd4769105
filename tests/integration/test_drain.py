"""Graceful drain: TorchServe under load is stopped the way the container stops it.

The image runs ``tini -- python /app/deploy/start.py torchserve ...``; on ``docker stop``
or a pod deletion tini forwards SIGTERM to start.py, which fails readiness, waits the
drain time, then stops the Java frontend as ``torchserve --stop`` does. Here the same
command runs on free loopback ports and gets the same SIGTERM while 8 clients keep
sending. Every request sent before the SIGTERM must get its 200; requests sent later
(which Kubernetes would route to other pods once readiness failed) are counted apart.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import image_bytes
from tests.integration.support import background_load, private_port_entries, record
from tsbatch.client.process import TorchServe, effective_properties
from tsbatch.container import DRAIN_FILE_ENV, DRAIN_SECONDS_ENV
from tsbatch.paths import DEFAULT_PROPERTIES, REPO_ROOT

pytestmark = pytest.mark.slow

MODEL = "resnet18"
DRAIN_SECONDS = 4.0


def test_sigterm_drains_in_flight_requests(tmp_path: Path, model_store: Path) -> None:
    entries = {**private_port_entries(), "load_models": f"{MODEL}.mar"}
    properties = effective_properties(DEFAULT_PROPERTIES, tmp_path, model_store, overrides=entries)
    server = TorchServe(run_dir=tmp_path, properties_path=properties, model_store=model_store)
    env = {
        **os.environ,
        "TMPDIR": str(tmp_path),
        "LOG_LOCATION": str(tmp_path / "logs"),
        "METRICS_LOCATION": str(tmp_path / "logs"),
        DRAIN_FILE_ENV: str(tmp_path / "draining"),
        DRAIN_SECONDS_ENV: str(DRAIN_SECONDS),
        "TSBATCH_WRITABLE_STORE": str(tmp_path / "model-store"),
    }
    command = [
        sys.executable, str(REPO_ROOT / "deploy" / "start.py"),
        str(Path(sys.executable).parent / "torchserve"), "--start", "--foreground", "--ncs",
        "--model-store", str(model_store), "--ts-config", str(properties),
    ]  # fmt: skip
    with (tmp_path / "torchserve.out").open("ab") as log:
        supervisor = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    probe = [sys.executable, str(REPO_ROOT / "deploy" / "probe.py"), "ready", "--config", str(properties)]
    probe += ["--key-file", str(server.key_file)]
    try:
        server.process = None
        server.wait_ready([MODEL], timeout=180)
        with background_load(server, MODEL, [image_bytes(size=(224, 224))], clients=8) as load:
            time.sleep(3)
            stop_sent = time.time()
            supervisor.send_signal(signal.SIGTERM)
            time.sleep(1)
            draining_probe = subprocess.run(probe, cwd=tmp_path, env=env, capture_output=True, text=True)
            exit_code = supervisor.wait(timeout=DRAIN_SECONDS + 60)
            stopped = time.time()
        before = [r for r in load.records if r.start < stop_sent]
        failed_before = [r for r in before if r.status != 200]
        after = [r for r in load.records if r.start >= stop_sent]
        served_after = [r for r in after if r.status == 200]
        record(
            "drain",
            sent_before_sigterm=len(before),
            failed_before_sigterm=len(failed_before),
            statuses_failed_before=sorted({r.status for r in failed_before}),
            sent_after_sigterm=len(after),
            served_after_sigterm=len(served_after),
            drain_seconds=DRAIN_SECONDS,
            sigterm_to_exit_s=round(stopped - stop_sent, 2),
        )
        assert exit_code == 0, server.log_tail()
        assert draining_probe.returncode == 1 and "draining" in draining_probe.stderr
        assert before and not failed_before, f"{len(failed_before)}/{len(before)} accepted requests failed"
        assert served_after, "requests kept being served during the drain"
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait()
