"""A ``torch.export`` program that does not trace into TorchScript, built and served.

A tiny network that flattens by its batch size (``x.view(bs, -1)``, as EfficientNet-Lite
does) is exported with a dynamic batch exactly as docs/models.md shows, named in a
models.yaml entry and built by the build's own code: tracing its graph bakes the batch of
two in, so the archive has no TorchScript and its AOTInductor package serves. A real
TorchServe answers concurrent single images and several-image requests (batches of several
sizes, one larger than the package was exported for), each as the eager network does.
"""

from __future__ import annotations

import base64
import io
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
import yaml
from PIL import Image

from image_serving.images import decode_pixels, model_batch
from tests.conftest import BatchFlattening
from tests.integration.support import private_port_entries
from tsbatch.analysis.tune.mar import read_mar, repackage
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import ModelSpec, load_manifest
from tsbatch.archive.package import private_store
from tsbatch.archive.pipeline import export_if_needed
from tsbatch.paths import HANDLERS_DIR
from tsbatch.server.process import TorchServe, WorkerLoadError
from tsbatch.server.served import served_decision

MODEL = "batch_reshaping"
LABELS = ["red", "green", "blue"]
CROP = 16
EXPORT_BOUND = 4  # compile.max_batch_size: a request of six images runs in two slices
SETTINGS = {
    "minWorkers": 1,
    "maxWorkers": 1,
    "batchSize": 4,
    "maxBatchDelay": 50,
    "responseTimeout": 60,
    "torchThreads": 1,
}


@pytest.fixture(scope="module")
def network() -> torch.nn.Module:
    torch.manual_seed(0)
    return BatchFlattening(len(LABELS)).eval()


@pytest.fixture(scope="module")
def built(network: torch.nn.Module, tmp_path_factory: pytest.TempPathFactory) -> tuple[ModelSpec, Path, Path]:
    """The program exported as docs/models.md shows, built from its models.yaml entry."""
    work = tmp_path_factory.mktemp("exported-program")
    batch = torch.export.Dim("batch", min=1)
    program = torch.export.export(network, (torch.randn(2, 3, CROP, CROP),), dynamic_shapes=({0: batch},))
    torch.export.save(program, str(work / "model.pt2"))
    (work / "labels.txt").write_text("\n".join(LABELS))
    entry = {
        "kind": "image",
        "handler": str(HANDLERS_DIR / "image_classifier_handler.py"),
        "version": "1.0",
        "weights": {"path": str(work / "model.pt2"), "labels": str(work / "labels.txt"), "torchvision": None},
        "preprocessing": {"resize_size": 20, "crop_size": CROP, "mean": [0.5] * 3, "std": [0.5] * 3},
        "verify": {"batch_sizes": [1, 3]},
        # One fp32 package, whatever this CPU's flags: the serving path is under test.
        "compile": {"targets": ["cpu-fp32"], "max_batch_size": EXPORT_BOUND, "torchscript_precisions": []},
    }
    manifest_path = work / "models.yaml"
    manifest_path.write_text(yaml.safe_dump({"build_dir": "build", "models": {MODEL: entry}}))
    manifest = load_manifest(manifest_path)
    spec = manifest.model(MODEL)
    export_if_needed(spec, work, force=False)
    properties, store = private_store(work / "serve", [MODEL], {MODEL: SETTINGS}, manifest=manifest)
    return spec, properties, store


@pytest.fixture(scope="module")
def server(start_server, built) -> TorchServe:
    _, properties, store = built
    return start_server(store, [MODEL], source=properties)


def photo(index: int) -> bytes:
    """A small coloured JPEG, different for each index."""
    colour = (40 * index % 256, 255 - 30 * index % 256, 90 + 50 * index % 166)
    image = Image.new("RGB", (24 + index, 20 + 2 * index), colour)
    image.paste((255 - colour[0], colour[2], colour[1]), (3, 4, 12 + index % 8, 14))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=95)
    return buffer.getvalue()


def test_the_build_serves_the_program_through_its_package_and_says_why(built) -> None:
    spec, _, store = built
    info = artifacts.read_json(spec.artifact_dir / artifacts.BUILD_INFO_FILE)
    assert info["torchscript"] == "none"
    assert "serves only the batch size it was traced on" in info["no_torchscript"]
    assert info["verification"]["max_abs_diff_batch3_vs_single"] <= 1e-4  # the program itself
    handler = artifacts.read_json(spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE)
    assert handler["model_file"] == "" and handler["compiled_models"] == ["model.cpu-fp32.pt2"]
    assert "torchscript-fp32" not in handler["check_outputs"]
    report = (spec.artifact_dir / artifacts.REPORT_MARKDOWN).read_text()
    assert "**No TorchScript**" in report and "(model.cpu-fp32.pt2)" in report
    with zipfile.ZipFile(store / f"{MODEL}.mar") as archive:
        names = set(archive.namelist())
    assert "model.cpu-fp32.pt2" in names and artifacts.MODEL_FILE not in names


def test_batches_of_every_size_answer_as_the_eager_network(server: TorchServe, built, network) -> None:
    spec, _, _ = built
    decision = served_decision(server, MODEL)
    assert (decision["runtime"], decision["file"]) == ("aoti", "model.cpu-fp32.pt2")
    assert "no-torchscript" in [reason["code"] for reason in decision["why"]]

    bodies = [photo(index) for index in range(10)]
    handler = artifacts.read_json(spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE)
    fields = ("resize_size", "crop_size", "max_image_pixels", "max_body_bytes")
    pixels = [decode_pixels(body, **{key: handler[key] for key in fields}) for body in bodies]
    with torch.inference_mode():
        expected = torch.softmax(
            network(model_batch(pixels, handler["mean"], handler["std"], torch.device("cpu"))), 1
        )

    b64 = [base64.b64encode(body).decode() for body in bodies]
    calls = [
        lambda i=i: server.client.predict(MODEL, bodies[i]) for i in range(4)
    ]  # singles, batched together
    calls.append(lambda: server.client.session.post(  # six inputs in one request: beyond the export bound
        f"{server.url('inference')}/predictions/{MODEL}", json={"images": b64[4:]},
        headers=server.client.headers(), timeout=60,
    ))  # fmt: skip
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        responses = list(pool.map(lambda call: call(), calls))
    assert [response.status_code for response in responses] == [200] * len(calls), [r.text for r in responses]
    answers = [response.json() for response in responses[:4]] + responses[4].json()["results"]
    for answer, probabilities in zip(answers, expected, strict=True):
        top = answer["predictions"][0]
        assert (top["label"], top["index"]) == (
            LABELS[int(probabilities.argmax())],
            int(probabilities.argmax()),
        )
        for item in answer["predictions"]:
            assert item["label"] == LABELS[item["index"]]
            assert item["probability"] == pytest.approx(float(probabilities[item["index"]]), abs=1e-4)


def test_a_machine_that_can_run_none_of_its_packages_fails_the_workers_load_saying_why(
    built, tmp_path: Path
) -> None:
    """The archive as if built on a CPU with a feature this one lacks: no TorchScript to
    fall back on, so the worker must not become READY, and its death says why."""
    _, _, store = built
    info = read_mar(store / f"{MODEL}.mar")
    handler = {**info.config["handler"], "compiled_cpu_flags": ["a_feature_no_cpu_has"]}
    other_store = tmp_path / "model-store"
    repackage(info, other_store / f"{MODEL}.mar", {"handler": handler})
    properties = tmp_path / "config.properties"
    entries = {**private_port_entries(), "load_models": f"{MODEL}.mar"}
    properties.write_text("".join(f"{key}={value}\n" for key, value in entries.items()))
    server = TorchServe(run_dir=tmp_path, properties_path=properties, model_store=other_store)
    with pytest.raises(WorkerLoadError) as failed:
        server.start([MODEL], timeout=180)
    message = str(failed.value)
    assert "NothingToServeError: this archive has no TorchScript model and none of its AOTInductor" in message
    assert "a_feature_no_cpu_has, which this CPU lacks" in message
