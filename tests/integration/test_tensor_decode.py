"""The tensor decode path forced on a CPU, through a real TorchServe: the archive is
repackaged with ``decodePath=tensor`` and a two-thread decode pool, as a GPU host would
serve it (there ``decode_jpeg`` runs on the device; here the same code on the CPU)."""

from __future__ import annotations

import io
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import requests
from PIL import Image

from tsbatch.archive.package import private_store
from tsbatch.server.process import TorchServe
from tsbatch.server.served import served_decision

MODEL = "resnet18"


def picture(fmt: str, mode: str = "RGB", seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    small = Image.fromarray(rng.integers(0, 256, (4, 4, 3), dtype=np.uint8))
    buffer = io.BytesIO()
    small.resize((96, 80), Image.Resampling.BILINEAR).convert(mode).save(buffer, format=fmt)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def tensor_server(start_server, model_store: Path, tmp_path_factory) -> TorchServe:
    work = tmp_path_factory.mktemp("tensor-decode")
    # A long delay, so concurrent requests surely share a batch.
    forced = {MODEL: {"decodePath": "tensor", "decodeThreads": 2, "batchSize": 4, "maxBatchDelay": 300}}
    properties, store = private_store(work / "serve", [MODEL], forced)
    return start_server(store, [MODEL], source=properties)


def post(server: TorchServe, body: bytes) -> requests.Response:
    return requests.post(
        f"{server.url('inference')}/predictions/{MODEL}",
        data=body,
        headers={**server.client.headers(), "Content-Type": "application/octet-stream"},
        timeout=120,
    )


def test_the_worker_says_it_decodes_on_the_tensor_path(tensor_server: TorchServe) -> None:
    decision = served_decision(tensor_server, MODEL)
    assert (decision["decode_path"], decision["decode_threads"]) == ("tensor", 2)


def test_a_mixed_batch_falls_back_per_image_and_a_truncated_jpeg_fails_alone(
    tensor_server: TorchServe,
) -> None:
    jpeg = picture("JPEG")
    bodies = [jpeg, picture("PNG"), picture("JPEG", mode="CMYK"), jpeg[: len(jpeg) // 2]]
    alone = post(tensor_server, jpeg).json()
    with ThreadPoolExecutor(max_workers=len(bodies)) as pool:
        responses = list(pool.map(lambda body: post(tensor_server, body), bodies))
    assert [r.status_code for r in responses] == [200, 200, 200, 400], [r.text for r in responses]
    assert responses[3].json()["error"]["type"] == "invalid_image"
    assert "truncated or corrupt" in responses[3].json()["error"]["message"]
    assert responses[0].json()["predictions"][0]["index"] == alone["predictions"][0]["index"]
