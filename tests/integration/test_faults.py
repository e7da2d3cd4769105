"""Faults against a real TorchServe: a killed worker, a batch that runs out of memory or
fails unexpectedly, and expired keys under the health probe.

The server must restart what died, answer every request (a clear 5xx JSON for the ones
that were in flight, never a hang), keep serving the next requests, and let the probes
tell Kubernetes the truth. Loads are bounded and stay on 127.0.0.1.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.conftest import image_bytes
from tests.integration.support import background_load, record
from tsbatch.archive.manifest import Manifest, load_manifest
from tsbatch.archive.package import package
from tsbatch.client.auth import auth_headers
from tsbatch.client.load import NO_ANSWER
from tsbatch.config.properties import update_model_settings
from tsbatch.paths import REPO_ROOT

pytestmark = pytest.mark.slow

MODEL = "resnet18"
PROBE = REPO_ROOT / "deploy" / "probe.py"


def run_probe(server: Any, check: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """deploy/probe.py as kubelet runs it, pointed at this server's config and key file."""
    command = [sys.executable, str(PROBE), check, *extra]
    command += ["--config", str(server.properties_path), "--key-file", str(server.key_file)]
    return subprocess.run(command, capture_output=True, text=True, timeout=30)


def worker_pids(server: Any, model: str = MODEL) -> list[int]:
    return [worker["pid"] for worker in server.client.describe(model)["workers"]]


# ---------------------------------------------------------------- killed worker
def test_killed_worker_is_restarted_and_only_in_flight_requests_fail(start_server, model_store) -> None:
    server = start_server(model_store, [MODEL])
    batch_size = server.client.describe(MODEL)["batchSize"]
    assert run_probe(server, "ready").returncode == 0
    (victim,) = worker_pids(server)

    with background_load(server, MODEL, [image_bytes()], clients=8) as load:
        time.sleep(2)
        killed_at = time.time()  # the records' clock
        os.kill(victim, signal.SIGKILL)
        unready = None
        deadline = killed_at + 90
        while True:
            workers = server.client.describe(MODEL)["workers"]
            if unready is None and any(w["status"] != "READY" for w in workers):
                unready = run_probe(server, "ready")  # as kubelet would, while the worker is down
            if workers and all(w["status"] == "READY" and w["pid"] != victim for w in workers):
                break
            assert time.time() < deadline, f"worker not restarted after 90 s: {workers}"
            time.sleep(0.2)
        ready_after = time.time() - killed_at
        time.sleep(2)  # later requests, on the new worker

    outcomes = load.records
    failed = [o for o in outcomes if o.status != 200]
    succeeded_after_kill = [o for o in outcomes if o.status == 200 and o.start > killed_at]
    first_success = min(o.finished for o in succeeded_after_kill) - killed_at
    slowest = max(o.finished - o.start for o in outcomes)
    print(
        f"\n[faults] worker kill under load (8 clients, batchSize {batch_size}): {len(outcomes)} requests, "
        f"{len(failed)} failed ({sorted({o.status for o in failed})}), worker READY again after "
        f"{ready_after:.1f} s, first success after the kill at {first_success:.1f} s, slowest answer {slowest:.1f} s"
    )
    record(
        "worker_kill",
        requests=len(outcomes),
        failed=len(failed),
        failed_statuses=sorted({o.status for o in failed}),
        worker_ready_after_s=round(ready_after, 2),
        first_success_after_kill_s=round(first_success, 2),
        slowest_answer_s=round(slowest, 2),
    )
    assert all(o.status != NO_ANSWER for o in outcomes), (
        "a request got no HTTP answer (hang or dropped connection)"
    )
    for outcome in failed:
        assert 500 <= outcome.status < 600, outcome
        assert "message" in json.loads(outcome.body), outcome.body  # TorchServe's JSON error
        assert outcome.start <= killed_at + 0.5, f"a request sent after the kill failed: {outcome}"
    # A kill that lands between two batches fails nothing (seen once in CI: 1,903 requests, none
    # failed); the restart itself is checked above, by the new worker's pid.
    assert len(failed) <= batch_size, "only the batch in flight on the killed worker may fail"
    assert succeeded_after_kill, "no request succeeded after the restart"
    assert unready is not None and unready.returncode == 1, "readiness must fail while the worker is down"
    assert run_probe(server, "ready").returncode == 0
    assert worker_pids(server)[0] != victim


# ---------------------------------------------------------------- failing batches
FAULTY_HANDLER = '''\
"""The ResNet handler with batch failures on demand: the fault tests' only test double."""

import torch

from image_classifier_handler import ImageClassifierHandler

OOM_MARKER = b"INJECT-OOM"
ERROR_MARKER = b"INJECT-ERROR"


class FaultInjectingHandler(ImageClassifierHandler):
    """A marker body decodes to an impossible tensor; a batch holding one fails in infer()."""

    def decode_batch(self, values):
        size = self.config.crop_size
        fills = {OOM_MARKER: float("inf"), ERROR_MARKER: float("-inf")}
        markers = [bytes(v) if isinstance(v, (bytes, bytearray)) else None for v in values]
        decoded = super().decode_batch(values)
        return [
            torch.full((3, size, size), fills[marker]) if marker in fills else item
            for marker, item in zip(markers, decoded)
        ]

    def infer(self, items):
        batch = torch.stack(items)
        if torch.isposinf(batch).any():
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (injected)")
        if torch.isneginf(batch).any():
            raise ValueError("injected unexpected failure")
        return super().infer(items)
'''


def faulty_store(directory: Path, max_batch_delay_ms: int) -> tuple[Path, Path]:
    """Package resnet18 with FaultInjectingHandler (the real batchkit and ResNet handler
    inside), with config.properties' settings except the batch delay."""
    repo = load_manifest()
    spec = repo.model(MODEL)
    artifacts = directory / "build" / MODEL
    artifacts.mkdir(parents=True)
    for path in spec.artifact_dir.iterdir():
        if path.is_file():
            (artifacts / path.name).symlink_to(path.resolve())
    shutil.copy(spec.handler, artifacts / spec.handler.name)  # imported by the faulty handler
    handler = directory / "faulty_handler.py"
    handler.write_text(FAULTY_HANDLER)
    properties = directory / "config.properties"
    shutil.copy(REPO_ROOT / "config.properties", properties)
    shutil.copy(REPO_ROOT / "metrics.yaml", directory / "metrics.yaml")
    update_model_settings(properties, MODEL, {"maxBatchDelay": max_batch_delay_ms})
    store = directory / "model-store"
    faulty = dataclasses.replace(spec.with_settings(handler=str(handler)), build_dir=directory / "build")
    package(
        faulty,
        Manifest(models={MODEL: faulty}, build_dir=faulty.build_dir, model_store=store),
        properties,
        force=True,
    )
    return properties, store


def post_together(server: Any, bodies: Sequence[bytes]) -> list[requests.Response]:
    """Send all bodies at the same moment, so they share one batch."""
    barrier = threading.Barrier(len(bodies))
    responses: list[requests.Response | None] = [None] * len(bodies)

    def send(index: int) -> None:
        barrier.wait()
        responses[index] = server.client.predict(MODEL, bodies[index], "application/octet-stream", timeout=60)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [response for response in responses if response is not None]


def test_failing_batch_gets_a_json_5xx_and_the_worker_keeps_serving(
    start_server, model_store, tmp_path
) -> None:
    # A long batch delay puts requests sent together into one batch.
    properties, store = faulty_store(tmp_path, max_batch_delay_ms=500)
    server = start_server(store, [MODEL], source=properties)
    pids = worker_pids(server)
    image = image_bytes()

    oom = server.client.predict(MODEL, b"INJECT-OOM", "application/octet-stream")
    assert oom.status_code == 503
    assert oom.headers["Content-Type"].startswith("application/json")
    assert oom.json()["error"]["type"] == "resource_exhausted"

    crash = server.client.predict(MODEL, b"INJECT-ERROR", "application/octet-stream")
    assert crash.status_code == 500
    assert crash.json()["error"] == {
        "type": "inference_failed",
        "message": "ValueError: injected unexpected failure",
    }

    batch = post_together(server, [image, image, b"INJECT-OOM", image])
    assert [r.status_code for r in batch] == [503] * 4, "every request of the failed batch gets the error"
    assert {r.json()["error"]["type"] for r in batch} == {"resource_exhausted"}

    after = post_together(server, [image] * 4)
    assert [r.status_code for r in after] == [200] * 4
    assert all(r.json()["predictions"] for r in after)
    assert worker_pids(server) == pids, "the worker must survive failed batches, not be restarted"
    print(
        f"\n[faults] OOM batch -> 503 resource_exhausted, error -> 500 inference_failed; same worker pid {pids}"
    )


# ---------------------------------------------------------------- probes and keys
# Keys must outlive the start (the runner waits for READY with the management key), then
# expire within the test: 30 s.
KEY_MINUTES = 0.5


def test_probe_survives_key_expiry_with_the_container_config(start_server, model_store) -> None:
    """The image's config (addresses swapped for free loopback ports by the runner) starts,
    and the readiness probe keeps passing after TorchServe's keys expire."""
    server = start_server(
        model_store,
        [MODEL],
        source=REPO_ROOT / "deploy" / "config.container.properties",
        overrides={
            "metrics_config": str(REPO_ROOT / "metrics.yaml"),
            "token_expiration_min": str(KEY_MINUTES),
        },
    )
    keys_at_start = json.loads(server.key_file.read_text())
    ready = run_probe(server, "ready")
    assert ready.returncode == 0, ready.stderr
    assert MODEL in ready.stdout
    assert run_probe(server, "live").returncode == 0

    expires = datetime.fromisoformat(keys_at_start["management"]["expiration time"])
    time.sleep(max(0.0, (expires - datetime.now(UTC)).total_seconds()) + 1)  # both keys have expired now
    stale = requests.get(
        f"{server.url('management')}/models", headers=auth_headers(server.token("management")), timeout=10
    )
    assert stale.status_code == 400, "the management key should have expired"

    ready = run_probe(server, "ready")
    assert ready.returncode == 0, ready.stderr
    keys_now = json.loads(server.key_file.read_text())
    assert keys_now["management"]["key"] != keys_at_start["management"]["key"], (
        "probe refreshes the expired key"
    )
    assert keys_now["inference"]["key"] == keys_at_start["inference"]["key"], "clients' key left alone"

    printed = run_probe(server, "key", "inference")
    assert printed.returncode == 0
    fresh = printed.stdout.strip()
    answer = requests.get(
        f"{server.url('inference')}/ping", headers={"Authorization": f"Bearer {fresh}"}, timeout=10
    )
    assert answer.status_code == 200
