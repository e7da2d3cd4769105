"""A second image architecture through the same pipeline: mobilenet_v3_small trained on the
digits (tiny: one epoch, 32x32), exported, verified, gated and packaged by the build's own
code from a private models.yaml and config.properties entry, and served by a real
TorchServe with the image classifier handler."""

from __future__ import annotations

import pytest
import torch
import yaml

from image_serving.images import decode_pixels, model_batch
from tests.integration.test_resnet_serving import digit_png
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import load_manifest
from tsbatch.archive.package import private_store
from tsbatch.archive.pipeline import export_if_needed
from tsbatch.environment import ALLOW_DIGITS_ENV
from tsbatch.paths import HANDLERS_DIR
from tsbatch.server.process import TorchServe

pytestmark = pytest.mark.slow

MODEL = "digits_mobilenet"
ARCHITECTURE = "mobilenet_v3_small"
TOP_K = 3
GATE = 0.3
SETTINGS = {
    "minWorkers": 1,
    "maxWorkers": 1,
    "batchSize": 4,
    "maxBatchDelay": 10,
    "responseTimeout": 60,
    "torchThreads": 1,
}


@pytest.fixture(scope="module")
def mobilenet_archive(tmp_path_factory):
    """The model built as ``make archive`` builds one, from a manifest naming only it."""
    work = tmp_path_factory.mktemp("second-architecture")
    entry = {
        "kind": "image",
        "handler": str(HANDLERS_DIR / "image_classifier_handler.py"),
        "version": "1.0",
        "architecture": ARCHITECTURE,
        "top_k": TOP_K,
        "weights": {
            "torchvision": None,
            # One epoch: MobileNetV3 learns slowly from scratch, so the gate is well above
            # chance (0.1), not the default's 0.95. One thread: two fight on a shared machine.
            "digits": {
                "image_size": 32,
                "epochs": 1,
                "batch_size": 32,
                "learning_rate": 0.005,
                "min_accuracy": GATE,
                "threads": 1,
            },
        },
        "verify": {"batch_sizes": [1, 4]},
        "compile": {"targets": [], "torchscript_precisions": []},  # the path is under test, not packages
    }
    manifest_path = work / "models.yaml"
    manifest_path.write_text(yaml.safe_dump({"build_dir": "build", "models": {MODEL: entry}}))
    manifest = load_manifest(manifest_path)
    spec = manifest.model(MODEL)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ALLOW_DIGITS_ENV, "1")
        export_if_needed(spec, work, force=False)
    properties, store = private_store(work / "serve", [MODEL], {MODEL: SETTINGS}, manifest=manifest)
    return spec, properties, store


@pytest.fixture(scope="module")
def mobilenet_server(start_server, mobilenet_archive) -> TorchServe:
    _, properties, store = mobilenet_archive
    return start_server(store, [MODEL], source=properties)


def test_the_build_records_the_architecture_it_trained(mobilenet_archive) -> None:
    spec, _, _ = mobilenet_archive
    info = artifacts.read_json(spec.artifact_dir / artifacts.BUILD_INFO_FILE)
    assert info["weights"].startswith(f"trained here on scikit-learn digits ({ARCHITECTURE}")
    assert info["num_classes"] == 10 and info["weights_details"]["epochs"] == 1
    assert info["weights_details"]["test_accuracy"] >= GATE
    handler = artifacts.read_json(spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE)
    assert (handler["architecture"], handler["crop_size"]) == (ARCHITECTURE, 32)


def test_digit_pngs_get_the_top_k_digits_the_built_model_gives(mobilenet_archive, mobilenet_server) -> None:
    """Each answer is what the archive's TorchScript model gives in-process for that PNG."""
    spec, _, _ = mobilenet_archive
    handler = artifacts.read_json(spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE)
    model = torch.jit.load(str(spec.artifact_dir / artifacts.MODEL_FILE))
    bodies = [digit_png(index, size=32) for index in range(10)]
    fields = ("resize_size", "crop_size", "max_image_pixels", "max_body_bytes")
    pixels = [decode_pixels(body, **{key: handler[key] for key in fields}) for body in bodies]
    with torch.inference_mode():
        expected = torch.softmax(
            model(model_batch(pixels, handler["mean"], handler["std"], torch.device("cpu"))), 1
        )
    for body, probabilities in zip(bodies, expected, strict=True):
        response = mobilenet_server.client.predict(MODEL, body)
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["model"] == MODEL
        predictions = answer["predictions"]
        assert len(predictions) == TOP_K
        assert predictions[0]["label"] == str(int(probabilities.argmax()))
        for item in predictions:  # the labels are the digits, each at its own index
            assert item["label"] == str(item["index"])
            assert item["probability"] == pytest.approx(float(probabilities[item["index"]]), abs=1e-4)
