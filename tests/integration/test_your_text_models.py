"""Your fine-tuned text classifiers, served: tiny BERT, DistilBERT and RoBERTa ``save_pretrained``
folders (tests/classifier_folders.py), each archived by the build's own code from a models.yaml
entry of four keys (kind, handler, version, weights), all three served by one real
TorchServe, each answering as its Hugging Face model does in this process.

Compiling AOTInductor packages takes tens of seconds a model here, so only the BERT builds
one (its bf16 package, through the ``compile`` setting given to the export; the entry keeps
its four keys); the others are built with TorchScript alone.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
import yaml

from tests.classifier_folders import LABELS, TOKENS
from tests.integration.support import served_tolerance
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import Manifest, load_manifest
from tsbatch.archive.package import private_store
from tsbatch.kinds.text.export import export
from tsbatch.kinds.text.kind import TEXT
from tsbatch.kinds.text.schema import TextModel
from tsbatch.paths import REPO_ROOT
from tsbatch.server.process import TorchServe

MODELS = {"your_bert": "bert", "your_distilbert": "distilbert", "your_roberta": "roberta"}
COMPILED = "your_bert"
SETTINGS = {
    "minWorkers": 1,
    "maxWorkers": 1,
    "batchSize": 4,
    "maxBatchDelay": 200,  # concurrent requests surely share a batch
    "responseTimeout": 120,
    "torchThreads": 1,
}
TEXTS = [
    "hi",
    "where is my parcel, it should have arrived last week",
    "I was charged twice for the same order and want the money back today",
    "great service, thank you!",
    "the app keeps crashing whenever I open the settings page " * 8,  # longer than max_length
]


@pytest.fixture(scope="module")
def text_archives(tmp_path_factory, text_classifier_folders) -> tuple[Manifest, Path, Path]:
    work = tmp_path_factory.mktemp("your-text-models")
    handler = str(REPO_ROOT / TEXT.handler)
    entries = {
        name: {
            "kind": "text",
            "handler": handler,
            "version": "1.0",
            "weights": {"path": str(text_classifier_folders[arch])},
        }
        for name, arch in MODELS.items()
    }
    manifest_path = work / "models.yaml"
    manifest_path.write_text(yaml.safe_dump({"build_dir": str(work / "build"), "models": entries}))
    manifest = load_manifest(manifest_path)
    for name, spec in manifest.models.items():
        assert set(spec.config.model_fields_set) == {"kind", "handler", "version", "weights"}
        packages = {"targets": ["cpu-bf16"]} if name == COMPILED else {"targets": []}
        export(
            spec, spec.with_settings(compile={**packages, "torchscript_precisions": []}).entry_as(TextModel)
        )
    properties, store = private_store(
        work / "serve", list(MODELS), dict.fromkeys(MODELS, SETTINGS), manifest=manifest
    )
    return manifest, properties, store


@pytest.fixture(scope="module")
def text_server(start_server, text_archives) -> TorchServe:
    _, properties, store = text_archives
    return start_server(store, list(MODELS), source=properties)


def hugging_face_probabilities(folder: Path, texts: list[str]) -> torch.Tensor:
    """The folder's model and tokenizer as their user runs them, in this process."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForSequenceClassification.from_pretrained(str(folder)).eval()
    encoded = tokenizer(texts, padding=True, truncation=True, max_length=TOKENS, return_tensors="pt")
    with torch.inference_mode():
        return torch.softmax(model(**encoded).logits, dim=-1)


def check_answer(answer: dict, model: str, expected: torch.Tensor, tolerance: float) -> None:
    labels = LABELS[MODELS[model]]
    assert answer["model"] == model and answer["in_scope"] is True  # out of scope was not asked for
    assert answer["intent"] == labels[int(expected.argmax())]
    assert {item["intent"] for item in answer["top_k"]} == set(labels)
    for item in answer["top_k"]:
        assert item["probability"] == pytest.approx(
            float(expected[labels.index(item["intent"])]), abs=tolerance
        )


def test_each_archive_says_where_its_weights_came_from(text_archives, text_classifier_folders) -> None:
    manifest, _, _ = text_archives
    for name, arch in MODELS.items():
        out = manifest.model(name).artifact_dir
        info = artifacts.read_json(out / artifacts.BUILD_INFO_FILE)
        assert info["weights"]["path"] == str(text_classifier_folders[arch]) and info["max_length"] == TOKENS
        assert info["verification"]["traced_vs_hugging_face"] <= 1e-4
        assert f"from `{text_classifier_folders[arch]}`" in (out / artifacts.REPORT_MARKDOWN).read_text()
    compiled = artifacts.read_json(manifest.model(COMPILED).artifact_dir / artifacts.BUILD_INFO_FILE)
    assert set(compiled["compiled"]) == {"cpu-bf16"} and "aoti-cpu-bf16" in compiled["gates"]


@pytest.mark.parametrize("model", list(MODELS))
def test_one_text_and_a_list_answer_as_the_hugging_face_model(
    model: str, text_server: TorchServe, text_classifier_folders
) -> None:
    expected = hugging_face_probabilities(text_classifier_folders[MODELS[model]], TEXTS)
    tolerance = served_tolerance(text_server, model)
    alone = text_server.client.predict(model, TEXTS[1], content_type="text/plain")
    assert alone.status_code == 200, alone.text
    check_answer(alone.json(), model, expected[1], tolerance)

    listed = text_server.client.predict(model, json.dumps({"texts": TEXTS}), content_type="application/json")
    assert listed.status_code == 200, listed.text
    results = listed.json()["results"]
    assert len(results) == len(TEXTS) and results[-1]["truncated"] is True
    for answer, probabilities in zip(results, expected, strict=True):
        check_answer(answer, model, probabilities, tolerance)


def test_concurrent_requests_to_the_three_models_answer_each_as_alone(
    text_server: TorchServe, text_classifier_folders
) -> None:
    calls = [(model, index) for model in MODELS for index in range(len(TEXTS))]
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        responses = list(
            pool.map(
                lambda call: text_server.client.predict(call[0], TEXTS[call[1]], content_type="text/plain"),
                calls,
            )
        )
    assert [response.status_code for response in responses] == [200] * len(calls), [r.text for r in responses]
    expected = {
        model: hugging_face_probabilities(text_classifier_folders[arch], TEXTS)
        for model, arch in MODELS.items()
    }
    for (model, index), response in zip(calls, responses, strict=True):
        check_answer(response.json(), model, expected[model][index], served_tolerance(text_server, model))
