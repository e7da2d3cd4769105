"""Graceful drain: TorchServe under load is stopped the way the container stops it.

The image runs ``tini -- python /app/deploy/start.py torchserve ...``; on ``docker stop``
or a pod deletion tini forwards SIGTERM to start.py, which fails readiness, waits the
drain time, then stops the Java frontend as ``torchserve --stop`` does. Here the same
command runs on free loopback ports and gets the same SIGTERM while 8 clients keep
sending. Every request sent before the SIGTERM must get its 200; requests sent later
(which Kubernetes would route to other pods once readiness failed) are counted apart.
The old way, ``tini -g`` (SIGTERM to the whole process group, workers included), runs
beside it for comparison (figures in reports/production/drain.json).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import image_bytes
from tests.integration.support import background_load, private_port_entries, record
from tsbatch.environment import DRAIN_FILE_ENV, DRAIN_SECONDS_ENV
from tsbatch.paths import DEFAULT_PROPERTIES, REPO_ROOT
from tsbatch.server.process import TorchServe, effective_properties

pytestmark = [pytest.mark.slow, pytest.mark.serial]  # timed under load: run alone

MODEL = "resnet18"
DRAIN_SECONDS = 4.0
FIGURES: dict[str, dict[str, Any]] = {}


def stop_under_load(run_dir: Path, model_store: Path, through_start_py: bool) -> dict[str, Any]:
    """Start TorchServe (through start.py with the cluster config's token auth off, or bare
    in its own process group), load it, stop it (SIGTERM to start.py, or to the whole group
    as `tini -g` did); the figures."""
    entries = {**private_port_entries(), "load_models": f"{MODEL}.mar"}
    if through_start_py:
        entries["disable_token_authorization"] = "true"  # as in deploy/config.cluster.properties
    properties = effective_properties(DEFAULT_PROPERTIES, run_dir, model_store, overrides=entries)
    server = TorchServe(run_dir=run_dir, properties_path=properties, model_store=model_store)
    env = {
        **os.environ,
        "TMPDIR": str(run_dir),
        "LOG_LOCATION": str(run_dir / "logs"),
        "METRICS_LOCATION": str(run_dir / "logs"),
        DRAIN_FILE_ENV: str(run_dir / "draining"),
        DRAIN_SECONDS_ENV: str(DRAIN_SECONDS),
        "TSBATCH_WRITABLE_STORE": str(run_dir / "model-store"),
    }
    command = [
        str(Path(sys.executable).parent / "torchserve"), "--start", "--foreground", "--ncs",
        "--model-store", str(model_store), "--ts-config", str(properties),
    ]  # fmt: skip
    if through_start_py:
        command = [sys.executable, str(REPO_ROOT / "deploy" / "start.py"), *command]
    with (run_dir / "torchserve.out").open("ab") as log:
        process = subprocess.Popen(
            command, cwd=run_dir, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    probe = [sys.executable, str(REPO_ROOT / "deploy" / "probe.py"), "ready", "--config", str(properties)]
    probe += ["--key-file", str(server.key_file)]
    try:
        server.wait_ready([MODEL], timeout=180)
        ready_before = subprocess.run(probe, cwd=run_dir, env=env, capture_output=True, text=True)
        with background_load(server, MODEL, [image_bytes(size=(224, 224))], clients=8) as load:
            time.sleep(3)
            stop_sent = time.time()
            if through_start_py:
                process.send_signal(signal.SIGTERM)
            else:
                os.killpg(process.pid, signal.SIGTERM)
            time.sleep(1)
            readiness = subprocess.run(probe, cwd=run_dir, env=env, capture_output=True, text=True)
            exit_code = process.wait(timeout=DRAIN_SECONDS + 60)
            stopped = time.time()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    before = [r for r in load.records if r.start < stop_sent]
    failed = [r for r in before if r.status != 200]
    return {
        "sent_before_sigterm": len(before),
        "failed_before_sigterm": len(failed),
        "statuses_failed_before": sorted({r.status for r in failed}),
        "served_after_sigterm": sum(1 for r in load.records if r.start >= stop_sent and r.status == 200),
        "sigterm_to_exit_s": round(stopped - stop_sent, 2),
        "exit_code": exit_code,
        "readiness_before_sigterm": ready_before.returncode,
        "readiness_after_sigterm": readiness.returncode,
        "readiness_says": readiness.stderr.strip()[-200:],
        "log_tail": server.log_tail(10),
    }


@pytest.mark.parametrize("way", ["start.py (the image now)", "tini -g (before)"])
def test_sigterm_under_load(way: str, tmp_path: Path, model_store: Path) -> None:
    figures = stop_under_load(tmp_path, model_store, through_start_py=way.startswith("start.py"))
    FIGURES[way] = {key: value for key, value in figures.items() if key != "log_tail"}
    record("drain", drain_seconds=DRAIN_SECONDS, **FIGURES)
    if not way.startswith("start.py"):
        return  # the baseline: its figures are the comparison, whatever they are
    assert figures["exit_code"] == 0, figures["log_tail"]
    assert figures["readiness_before_sigterm"] == 0, "the probe needs no key with token auth off"
    assert not (tmp_path / "key_file.json").exists()
    assert figures["readiness_after_sigterm"] == 1 and "draining" in figures["readiness_says"]
    assert figures["sent_before_sigterm"] > 0
    assert figures["failed_before_sigterm"] == 0, figures
    assert figures["served_after_sigterm"] > 0, "routed requests keep being served during the drain"
