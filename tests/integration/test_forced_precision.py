"""Reduced precision on any CPU: tiny archives built with a forced ``cpu-bf16`` target,
served by a real TorchServe, answering batch-mates as they answer alone.

bf16 runs emulated on a CPU without it (slower, fine on tiny models), so this path is
built, gated, loaded and served whatever CPU the suite runs on; on a CPU with native bf16
``make archive`` takes it too, and a test that only ran there would hide a break here.
"""

from __future__ import annotations

import io
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
import requests
import torch
from PIL import Image

from batchkit.tolerance import probabilities_disagree
from tests.conftest import TINY_LABELS, tiny_image_handler, write_tiny_clinc
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import Manifest, load_manifest
from tsbatch.archive.package import private_store
from tsbatch.kinds.text.export import export as export_intent
from tsbatch.kinds.text.schema import TextModel
from tsbatch.server.process import TorchServe
from tsbatch.server.served import served_decision

MODELS = ["resnet18", "bert_intent"]
PRECISION = "bf16"
PACKAGE = f"model.cpu-{PRECISION}.pt2"


def tiny_image_build(build: Path, tiny_gated_build: tuple[Path, dict]) -> None:
    """The tiny CNN's gated build as the resnet18 entry's artifacts, precision forced."""
    source, fields = tiny_gated_build
    out = build / "resnet18"
    out.mkdir(parents=True)
    for name in ("model.pt", PACKAGE):
        shutil.copy2(source / name, out / name)
    handler = {
        **tiny_image_handler(),
        **fields,
        "model_name": "resnet18",
        "precision": PRECISION,
        "runtime": "aoti",
    }
    handler["compiled_models"] = [PACKAGE]
    handler.pop("torch_threads")
    artifacts.write_json(out / artifacts.HANDLER_CONFIG_FILE, handler)
    artifacts.write_json(out / artifacts.LABELS_FILE, TINY_LABELS)


def tiny_intent_build(build: Path, base_model: Path, data: Path) -> None:
    """A tiny BERT trained one epoch and exported as the build exports bert_intent, with
    the compile target and precision forced."""
    spec = replace(load_manifest().model("bert_intent"), build_dir=build)
    settings = spec.with_settings(
        base_model=str(base_model),
        data={"format": "clinc150", "path": str(data)},
        training={"epochs": 1, "threads": 1, "gates": {"in_scope_accuracy": 0.0, "oos_recall": 0.0}},
        compile={
            "targets": [f"cpu-{PRECISION}"],
            "torchscript_precisions": [PRECISION],
            "max_batch_size": 8,
            "enforce_gates": False,  # one epoch of a random model: the path is under test, not accuracy
        },
        precision=PRECISION,
        runtime="aoti",  # the package path is under test, whichever runtime the build timed faster
    ).entry_as(TextModel)
    export_intent(spec, settings, spec.artifact_dir)


@pytest.fixture(scope="module")
def forced_server(start_server, tmp_path_factory, tiny_gated_build, tiny_base_model) -> TorchServe:
    work = tmp_path_factory.mktemp("forced-bf16")
    build = work / "build"
    tiny_image_build(build, tiny_gated_build)
    tiny_intent_build(build, tiny_base_model, write_tiny_clinc(work / "clinc.json"))
    repo = load_manifest()
    specs = {name: replace(repo.model(name), build_dir=build) for name in MODELS}
    manifest = Manifest(models=specs, build_dir=build, model_store=repo.model_store)
    # A long delay, so concurrent requests surely share a batch; the tiny CNN's package
    # was exported for batches of up to 4.
    slow = {
        "resnet18": {"batchSize": 4, "maxBatchDelay": 300},
        "bert_intent": {"batchSize": 8, "maxBatchDelay": 300},
    }
    properties, store = private_store(work / "serve", MODELS, slow, manifest=manifest)
    return start_server(store, MODELS, source=properties)


def post(server: TorchServe, model: str, body: bytes, content_type: str) -> requests.Response:
    return requests.post(
        f"{server.url('inference')}/predictions/{model}",
        data=body,
        headers={**server.client.headers(), "Content-Type": content_type},
        timeout=120,
    )


def png(seed: int) -> bytes:
    pixels = torch.randint(
        0, 256, (24, 24, 3), generator=torch.Generator().manual_seed(seed), dtype=torch.uint8
    )
    buffer = io.BytesIO()
    Image.fromarray(pixels.numpy()).save(buffer, format="PNG")
    return buffer.getvalue()


def answers_in_a_batch(server: TorchServe, model: str, bodies: list[bytes], content_type: str) -> list[dict]:
    with ThreadPoolExecutor(max_workers=len(bodies)) as pool:
        responses = list(pool.map(lambda body: post(server, model, body, content_type), bodies))
    assert [r.status_code for r in responses] == [200] * len(bodies), [r.text for r in responses]
    return [r.json() for r in responses]


def probabilities(answer: dict, key: str, name: str) -> dict[str, float]:
    return {str(item[name]): item["probability"] for item in answer[key]}


def test_both_workers_serve_the_forced_bf16_package(forced_server: TorchServe) -> None:
    for model in MODELS:
        decision = served_decision(forced_server, model)
        assert (decision["runtime"], decision["precision"], decision["file"]) == ("aoti", PRECISION, PACKAGE)
        code, detail = decision["why"][0]["code"], decision["why"][0]["detail"]
        assert code == "precision-set" and detail.startswith(f"{PRECISION} set in the archive")


@pytest.mark.parametrize(
    ("model", "content_type", "key", "name"),
    [("resnet18", "image/png", "predictions", "index"), ("bert_intent", "text/plain", "top_k", "intent")],
)
def test_batch_mates_answer_as_they_do_alone_within_the_bf16_tolerance(
    forced_server: TorchServe, model: str, content_type: str, key: str, name: str
) -> None:
    if model == "resnet18":
        bodies = [png(seed) for seed in range(6)]
    else:
        words = [
            "please",
            "tell",
            "me",
            "how",
            "much",
            "money",
            "is",
            "left",
            "in",
            "my",
            "checking",
            "account",
            "today",
        ]
        bodies = [" ".join(words[: 2 + 2 * i]).encode() for i in range(6)]
    alone = [post(forced_server, model, body, content_type).json() for body in bodies]
    together = answers_in_a_batch(forced_server, model, bodies, content_type)
    for single, batched in zip(alone, together, strict=True):
        first, second = probabilities(single, key, name), probabilities(batched, key, name)
        labels = sorted(set(first) & set(second))
        assert next(iter(first)) == next(iter(second)), "same top-1 at bf16"
        expected = torch.tensor([[first[label] for label in labels]])
        actual = torch.tensor([[second[label] for label in labels]])
        assert probabilities_disagree(expected, actual, PRECISION) is None
