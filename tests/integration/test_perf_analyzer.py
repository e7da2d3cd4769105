"""NVIDIA's perf_analyzer in its default mode (Open Inference Protocol over HTTP, the token
in -H) against a real TorchServe: it reads the plugin's model configuration and metadata,
runs a few seconds on both models (a text; a real photo through --input-data), and every
request it sent was answered (it stops at the first failure). Skipped with the reason
where `make perf-analyzer` could not install the binary."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import pytest
import requests

from tsbatch.client import perf_analyzer
from tsbatch.kinds.image.examples import jpeg, photo
from tsbatch.server.process import TorchServe

BINARY = perf_analyzer.find_perf_analyzer()
pytestmark = pytest.mark.skipif(
    BINARY is None, reason=f"perf_analyzer is not installed: {perf_analyzer.INSTALL_HINT}"
)


def test_model_config_answers_in_tritons_shape_from_the_served_settings(torchserve: TorchServe) -> None:
    base = torchserve.url("inference")
    for path in ("/v2/models/bert_intent/config", "/v2/models/bert_intent/versions/1.0/config"):
        config = requests.get(base + path, headers=torchserve.client.headers(), timeout=30).json()
        assert config["name"] == "bert_intent" and config["max_batch_size"] == 8
        assert config["input"] == [{"name": "text", "data_type": "TYPE_STRING", "dims": [1]}]
        assert config["output"] == [{"name": "predictions", "data_type": "TYPE_STRING", "dims": []}]
        assert config["dynamic_batching"] == {
            "preferred_batch_size": [8],
            "max_queue_delay_microseconds": 5000,
        }
        assert config["parameters"]["torchserve.maxBatchDelay"] == {"string_value": "5"}
    missing = requests.get(f"{base}/v2/models/nope/config", headers=torchserve.client.headers(), timeout=30)
    assert missing.status_code == 404 and "is not served" in missing.json()["error"]


@pytest.mark.parametrize(
    ("model", "input_name", "body"),
    [("bert_intent", "text", b"I lost my credit card"), ("resnet18", "image", None)],
)
def test_default_mode_completes_with_no_failed_request(
    torchserve: TorchServe, model: str, input_name: str, body: bytes | None
) -> None:
    body = body if body is not None else jpeg(photo(0, 224, 224))
    address = torchserve.url("inference").split("://", 1)[1]
    result = perf_analyzer.run(
        address, model, body, input_name, torchserve.token(), concurrency=4, window_s=1.0, binary=BINARY
    )
    assert result.requests > 0 and result.throughput_rps > 0
    assert 0 < result.p50_ms <= result.p99_ms


def test_random_text_works_and_a_raw_image_in_b64_gets_the_serialized_form_named(
    torchserve: TorchServe, tmp_path: Path
) -> None:
    """Random data: perf_analyzer makes random strings, which are texts (bert_intent) but not
    images; and a b64 value holding the file alone is refused with what to send instead."""
    address = torchserve.url("inference").split("://", 1)[1]
    common = [str(BINARY), "-u", address, "-H", f"Authorization: Bearer {torchserve.token()}", "-p", "1000"]
    common += ["-s", "100", "--concurrency-range", "2"]
    text = subprocess.run([*common, "-m", "bert_intent"], capture_output=True, text=True, timeout=120)
    assert text.returncode == 0, text.stdout[-2000:]
    image = subprocess.run([*common, "-m", "resnet18"], capture_output=True, text=True, timeout=120)
    assert image.returncode != 0 and "body is not an image" in image.stdout + image.stderr
    raw = tmp_path / "raw.json"
    raw.write_text(
        json.dumps({"data": [{"image": {"b64": base64.b64encode(jpeg(photo(0, 64, 64))).decode()}}]})
    )
    refused = subprocess.run(
        [*common, "-m", "resnet18", "--input-data", str(raw)], capture_output=True, text=True, timeout=120
    )
    assert refused.returncode != 0 and "4-byte little-endian length" in refused.stdout + refused.stderr
