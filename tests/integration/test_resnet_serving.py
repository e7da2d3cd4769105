"""The ResNet classifier on a real TorchServe: batching, isolation of bad requests, auth,
and config.properties as the single source of truth for batch settings."""

from __future__ import annotations

import io
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from PIL import Image
from sklearn.datasets import load_digits

from batchkit.candidates import ServingCandidate
from batchkit.config import from_mapping
from image_serving.config import ImageModelConfig
from tests.fakes import bomb_png
from tests.integration.support import served_tolerance
from tsbatch.archive import artifacts
from tsbatch.archive.compiled import host_targets
from tsbatch.archive.manifest import Manifest, load_manifest
from tsbatch.archive.package import private_store
from tsbatch.archive.variants import default_variant, variant_spec
from tsbatch.cli.daemon import start as serve_start
from tsbatch.cli.daemon import stop as serve_stop
from tsbatch.config.properties import update_model_settings
from tsbatch.kinds.image.examples import ink_pictures
from tsbatch.server.ports import free_ports, worker_port_base
from tsbatch.server.process import TorchServe
from tsbatch.server.served import served_decision, worker_rss_mb

MODEL = "resnet18"


def digit_png(index: int, size: int, fmt: str = "PNG") -> bytes:
    (image,) = ink_pictures(load_digits().images[index : index + 1])
    buffer = io.BytesIO()
    image.resize((size, size), Image.BILINEAR).save(buffer, format=fmt)
    return buffer.getvalue()


def assert_schema(body: dict) -> None:
    assert body["model"] == MODEL
    predictions = body["predictions"]
    assert len(predictions) == 5
    for item in predictions:
        assert set(item) == {"label", "index", "probability"}
        assert isinstance(item["label"], str) and isinstance(item["index"], int)
        assert 0.0 <= item["probability"] <= 1.0
    probabilities = [p["probability"] for p in predictions]
    assert probabilities == sorted(probabilities, reverse=True)


COUNTED = ["BatchedRequestsTotal", "BatchesTotal"]


@pytest.fixture(scope="module")
def default_server(torchserve: TorchServe) -> TorchServe:
    """resnet18 exactly as config.properties and `make archive` configure it: the session's
    shared instance (its counters are read as differences, so earlier modules' calls do not count)."""
    return torchserve


def test_sixteen_concurrent_clients_get_their_own_answers_in_batches(default_server: TorchServe) -> None:
    payloads = [digit_png(i, size=24 + 8 * (i % 5), fmt="PNG" if i % 2 else "JPEG") for i in range(32)]
    alone = []
    for payload in payloads:
        response = default_server.client.predict(MODEL, payload)
        assert response.status_code == 200, response.text
        alone.append(response.json())
    before = default_server.settled_counters(MODEL, COUNTED)

    def client(index: int) -> list[tuple[int, dict]]:
        session = requests.Session()
        answers = []
        for round_ in range(4):
            position = (index * 4 + round_) % len(payloads)
            response = session.post(
                f"{default_server.url('inference')}/predictions/{MODEL}",
                data=payloads[position],
                headers=default_server.client.headers(),
                timeout=60,
            )
            assert response.status_code == 200, response.text
            answers.append((position, response.json()))
        return answers

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = [answer for answers in pool.map(client, range(16)) for answer in answers]

    assert len(results) == 64
    for position, body in results:
        assert_schema(body)
        expected = alone[position]["predictions"]
        assert [p["index"] for p in body["predictions"]] == [p["index"] for p in expected]
        for got, want in zip(body["predictions"], expected, strict=True):
            assert got["probability"] == pytest.approx(
                want["probability"], abs=served_tolerance(default_server, MODEL)
            )
    after = default_server.settled_counters(
        MODEL, COUNTED, at_least={"BatchedRequestsTotal": before["BatchedRequestsTotal"] + 64}
    )
    served = after["BatchedRequestsTotal"] - before["BatchedRequestsTotal"]
    batches = after["BatchesTotal"] - before["BatchesTotal"]
    assert served == 64
    mean_batch = served / batches
    print(f"\n64 requests from 16 clients ran in {batches:.0f} batches (mean batch size {mean_batch:.2f})")
    assert mean_batch > 1.0


def test_trained_digits_model_recognises_digits(default_server: TorchServe) -> None:
    info = default_server.client.describe(MODEL)
    assert info["batchSize"] == 8
    digits = load_digits()
    hits = 0
    sample = range(1700, 1797)
    for index in sample:
        body = default_server.client.predict(MODEL, digit_png(index, size=48)).json()
        hits += body["predictions"][0]["label"] == str(digits.target[index])
    assert hits / len(sample) > 0.9


def test_token_auth_is_on(default_server: TorchServe) -> None:
    url = f"{default_server.url('inference')}/predictions/{MODEL}"
    assert requests.post(url, data=digit_png(0, 32), timeout=10).status_code == 400
    wrong = requests.post(url, data=digit_png(0, 32), headers={"Authorization": "Bearer wrong"}, timeout=10)
    assert wrong.status_code == 400
    management = requests.get(
        f"{default_server.url('management')}/models", headers=default_server.client.headers(), timeout=10
    )
    assert management.status_code == 400, "the inference key must not open the management API"


@pytest.fixture(scope="module")
def slow_batching_server(start_server, tmp_path_factory) -> TorchServe:
    """A long batch delay so that concurrent requests surely share one batch, served by the
    archive's compiled package (runtime pinned to aoti, as `make tune --variant` does)."""
    work = tmp_path_factory.mktemp("mixed")
    repo = load_manifest()
    spec = variant_spec(repo.model(MODEL), work, ServingCandidate.parse(host_targets()[0]))
    pinned = Manifest(models={MODEL: spec}, build_dir=spec.build_dir, model_store=repo.model_store)
    properties, store = private_store(
        work, [MODEL], {MODEL: {"batchSize": 8, "maxBatchDelay": 400}}, manifest=pinned
    )
    return start_server(store, [MODEL], source=properties)


def test_bad_requests_in_a_batch_fail_alone(slow_batching_server: TorchServe) -> None:
    whole_jpeg = digit_png(3, size=64, fmt="JPEG")
    bodies = [
        digit_png(1, 40),
        whole_jpeg[: len(whole_jpeg) // 2],
        b"",
        digit_png(7, 56, fmt="JPEG"),
        b"just some text, not a picture",
        bomb_png(20_000, 20_000),
        digit_png(9, 32),
        digit_png(4, 80, fmt="WEBP"),
    ]
    before = slow_batching_server.settled_counters(MODEL, COUNTED)
    with ThreadPoolExecutor(max_workers=len(bodies)) as pool:
        responses = list(pool.map(lambda body: slow_batching_server.client.predict(MODEL, body), bodies))
    after = slow_batching_server.settled_counters(
        MODEL, COUNTED, at_least={"BatchedRequestsTotal": before["BatchedRequestsTotal"] + len(bodies)}
    )

    statuses = [r.status_code for r in responses]
    assert statuses == [200, 400, 400, 200, 400, 413, 200, 200]
    for response in responses:
        assert response.headers["Content-Type"].startswith("application/json")
        if response.status_code == 200:
            assert_schema(response.json())
        else:
            error = response.json()["error"]
            assert error["type"] in {"invalid_image", "payload_too_large"} and error["message"]
    assert responses[5].json()["error"]["type"] == "payload_too_large"
    assert after["BatchedRequestsTotal"] - before["BatchedRequestsTotal"] == 8
    assert after["BatchesTotal"] - before["BatchesTotal"] <= 2, (
        "the mixed requests should have shared a batch"
    )


def test_editing_batch_size_and_serving_again_changes_the_live_setting(tmp_path: Path) -> None:
    properties, store = private_store(tmp_path / "serve", [MODEL])
    text = properties.read_text()
    ports = iter(free_ports(5))
    for key in ("inference_address", "management_address", "metrics_address"):
        text = re.sub(rf"^{key}=.*$", f"{key}=http://127.0.0.1:{next(ports)}", text, flags=re.MULTILINE)
    for key in ("grpc_inference_port", "grpc_management_port"):
        text = re.sub(rf"^{key}=.*$", f"{key}={next(ports)}", text, flags=re.MULTILINE)
    text = re.sub(
        r"^initial_worker_port=.*$", f"initial_worker_port={worker_port_base()}", text, flags=re.MULTILINE
    )
    properties.write_text(text)
    repo = load_manifest()
    manifest = Manifest(models=repo.models, build_dir=repo.build_dir, model_store=store)
    run_dir = tmp_path / "run"
    server = TorchServe(run_dir=run_dir, properties_path=run_dir / "config.properties", model_store=store)
    try:
        assert serve_start(run_dir, properties, 180, manifest) == 0
        assert server.client.describe(MODEL)["batchSize"] == 8
        update_model_settings(properties, MODEL, {"batchSize": 4, "maxBatchDelay": 25})
        assert serve_start(run_dir, properties, 180, manifest) == 0
        described = server.client.describe(MODEL)
        assert (described["batchSize"], described["maxBatchDelay"]) == (4, 25)
    finally:
        serve_stop(run_dir)


def test_each_worker_serves_what_the_build_decided_for_this_machine(
    default_server: TorchServe, slow_batching_server: TorchServe
) -> None:
    """Whatever this CPU is: the default worker serves the first candidate of the (pure)
    plan its archive and this machine give, says so in one log line and through the
    describe call; the pinned worker (which answered the mixed batch above) serves the
    host's package. Both report their memory."""
    handler = from_mapping(
        ImageModelConfig,
        artifacts.read_json(load_manifest().model(MODEL).artifact_dir / artifacts.HANDLER_CONFIG_FILE),
    )
    package = ServingCandidate.parse(host_targets()[0])
    assert package.file_name in handler.compiled_models, "the build compiles the host's target"
    model_dir = load_manifest().model(MODEL).artifact_dir
    first = default_variant(model_dir, 8)
    decision = served_decision(default_server, MODEL)
    file = first.file_name if first.runtime == "aoti" else handler.model_file
    assert (decision["runtime"], decision["precision"], decision["file"]) == (
        first.runtime,
        first.precision,
        file,
    )
    assert decision["why"][0]["code"] in ("measured", "other-cpu", "no-timings")
    default_log = (default_server.run_dir / "logs" / "model_log.log").read_text(errors="replace")
    assert f"serving {first.label} from {file} (cold load" in default_log
    pinned = served_decision(slow_batching_server, MODEL)
    assert (pinned["runtime"], pinned["file"]) == ("aoti", package.file_name)
    assert worker_rss_mb(default_server, MODEL) and all(
        size > 100 for size in worker_rss_mb(default_server, MODEL)
    )
