"""int8 end to end on a real TorchServe: a tiny CNN quantized, compiled and gated by the
build's own code, packaged with the ResNet handler, served with int8 forced in the archive,
and answering as the package does in-process."""

from __future__ import annotations

import dataclasses
import io
import json
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from PIL import Image

from image_serving.images import check_images, decode_pixels, model_batch
from tests.conftest import TINY_LABELS, TinyImageNet, tiny_image_handler
from tsbatch.archive import artifacts
from tsbatch.archive.compiled import CompileSettings, GateData, build_and_gate
from tsbatch.archive.gates import top1_accuracy
from tsbatch.archive.int8.candidate import Int8Plan
from tsbatch.archive.manifest import Manifest, load_manifest
from tsbatch.archive.package import private_store
from tsbatch.server.process import TorchServe

MODEL = "resnet18"  # the ResNet handler's archive name, here holding the tiny CNN


def picture(seed: int) -> bytes:
    pixels = torch.randint(
        0, 256, (20, 20, 3), generator=torch.Generator().manual_seed(seed), dtype=torch.uint8
    )
    buffer = io.BytesIO()
    Image.fromarray(pixels.numpy()).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def int8_archive(tmp_path_factory):
    """The tiny archive built as the build builds: fp32 TorchScript, and the int8 package
    that passed its gates, with ``precision: int8``."""
    work = tmp_path_factory.mktemp("int8-archive")
    spec = dataclasses.replace(load_manifest().model(MODEL), build_dir=work / "build")
    out = spec.artifact_dir
    out.mkdir(parents=True)
    torch.manual_seed(0)
    model = TinyImageNet(len(TINY_LABELS)).eval()
    scripted = torch.jit.script(model)
    images = torch.randn(48, 3, 16, 16, generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        targets = model(images[:16]).argmax(1)
    settings = CompileSettings(targets=("cpu-int8",), max_batch_size=8, torchscript_precisions=())
    plan = Int8Plan([(images[16:],)], "static, calibrated on 32 seeded images")
    batch = torch.export.Dim("batch", min=1, max=8)
    data = GateData(
        [(images[:8],), (images[8:16],)], top1_accuracy(targets), (check_images(16),), ({0: batch},)
    )
    gates = build_and_gate(model, scripted, out, settings, data, int8=plan)
    assert gates.compiled_models == ["model.cpu-int8.pt2"], [r.summary() for r in gates.results]
    scripted.save(str(out / artifacts.MODEL_FILE))
    (out / artifacts.LABELS_FILE).write_text(json.dumps(TINY_LABELS))
    handler = {**tiny_image_handler(), "model_name": MODEL, "precision": "int8", **gates.handler_fields()}
    artifacts.write_json(out / artifacts.HANDLER_CONFIG_FILE, handler)
    manifest = Manifest(models={MODEL: spec}, build_dir=spec.build_dir, model_store=work / "unused")
    properties, store = private_store(
        work, [MODEL], {MODEL: {"batchSize": 4, "maxBatchDelay": 50}}, manifest=manifest
    )
    return out, handler, properties, store


@pytest.fixture(scope="module")
def int8_server(start_server, int8_archive) -> TorchServe:
    _, _, properties, store = int8_archive
    return start_server(store, [MODEL], source=properties)


def test_the_forced_int8_package_serves_and_answers_as_in_process(
    int8_server: TorchServe, int8_archive
) -> None:
    out, handler, _, _ = int8_archive
    bodies = [picture(seed) for seed in range(8)]
    with ThreadPoolExecutor(max_workers=len(bodies)) as pool:
        responses = list(pool.map(lambda body: int8_server.client.predict(MODEL, body), bodies))
    assert [r.status_code for r in responses] == [200] * len(bodies), [r.text for r in responses]

    package = torch._inductor.aoti_load_package(str(out / "model.cpu-int8.pt2"))
    fields = ("resize_size", "crop_size", "max_image_pixels", "max_body_bytes")
    pixels = [decode_pixels(body, **{k: handler[k] for k in fields}) for body in bodies]
    inputs = model_batch(pixels, handler["mean"], handler["std"], torch.device("cpu"))
    with torch.inference_mode():
        expected = torch.softmax(package(inputs), -1)
    for response, probabilities in zip(responses, expected, strict=True):
        best = response.json()["predictions"][0]
        assert best["label"] == TINY_LABELS[int(probabilities.argmax())]
        assert best["probability"] == pytest.approx(float(probabilities.max()), abs=1e-4)

    log = (int8_server.run_dir / "logs" / "model_log.log").read_text()
    assert "why: precision-set: int8 set in the archive" in log
    assert "serving aoti int8 from model.cpu-int8.pt2" in log
