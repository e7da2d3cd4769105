"""A second image architecture through the same pipeline: mobilenet_v3_small trained on the
digits (tiny: one epoch, 32x32), exported, verified, gated and packaged by the build's own
code from a private models.yaml and config.properties entry, and served by a real
TorchServe with the image classifier handler."""

from __future__ import annotations

import pytest
import yaml
from sklearn.datasets import load_digits

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
        "handler": str(HANDLERS_DIR / "resnet_handler.py"),
        "version": "1.0",
        "architecture": ARCHITECTURE,
        "top_k": TOP_K,
        "weights": {
            "torchvision": None,
            "digits": {"image_size": 32, "epochs": 1, "learning_rate": 0.01, "min_accuracy": 0.5},
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
    handler = artifacts.read_json(spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE)
    assert (handler["architecture"], handler["crop_size"]) == (ARCHITECTURE, 32)


def test_a_digit_png_gets_its_top_k_digits(mobilenet_server: TorchServe) -> None:
    digits = load_digits()
    answers = []
    for index in range(10):
        response = mobilenet_server.predict(MODEL, digit_png(index, size=32))
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["model"] == MODEL
        labels = [item["label"] for item in body["predictions"]]
        assert len(labels) == TOP_K and set(labels) <= {str(d) for d in range(10)}
        answers.append(labels[0] == str(digits.target[index]))
    assert sum(answers) >= 5, answers  # trained past the build's gate of 0.5 held-out accuracy
