"""models.yaml is validated where it is loaded: typos and bad values name the file, the
model, the key and the nearest valid key, and the build refuses them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tsbatch.archive.manifest import Manifest, ManifestError, UnknownModel, load_manifest, workload_for
from tsbatch.kinds.image.kind import IMAGE
from tsbatch.kinds.image.schema import ImageModel
from tsbatch.kinds.text.kind import TEXT
from tsbatch.kinds.text.schema import TextModel
from tsbatch.paths import DEFAULT_MANIFEST


def edited_manifest(tmp_path: Path, model: str, **changes: object) -> Path:
    document = yaml.safe_load(DEFAULT_MANIFEST.read_text())
    document["models"][model].update(changes)
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_the_shipped_manifest_is_valid_and_typed() -> None:
    manifest = load_manifest()
    assert isinstance(manifest.model("resnet18").config, ImageModel)
    text = manifest.model("bert_intent").entry_as(TextModel)
    assert isinstance(text, TextModel) and text.max_length == 64 and text.data.strict


def test_an_entry_is_read_as_its_own_kind_only() -> None:
    manifest = load_manifest()
    assert manifest.model("resnet18").entry_as(ImageModel).architecture == "resnet18"
    with pytest.raises(ManifestError, match=r"models\.resnet18 is kind .image., not a TextModel"):
        manifest.model("resnet18").entry_as(TextModel)


def test_an_entry_without_a_handler_gets_its_kind_s(tmp_path: Path) -> None:
    document = yaml.safe_load(DEFAULT_MANIFEST.read_text())
    del document["models"]["bert_intent"]["handler"]
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(document))
    assert load_manifest(path).model("bert_intent").config.handler == "handlers/text_classifier_handler.py"


def test_a_typo_names_file_model_key_and_the_intended_key(tmp_path: Path) -> None:
    document = yaml.safe_load(DEFAULT_MANIFEST.read_text())
    document["models"]["bert_intent"]["max_lenght"] = document["models"]["bert_intent"].pop("max_length")
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(document))
    with pytest.raises(ManifestError) as raised:
        load_manifest(path)
    message = str(raised.value)
    assert str(path) in message and "models.bert_intent" in message
    assert "`max_lenght`: unknown key (did you mean `max_length`?)" in message


def test_nested_typos_wrong_types_and_ranges_are_errors(tmp_path: Path) -> None:
    path = edited_manifest(tmp_path, "bert_intent", training={"epoch": 2}, top_k="five", max_length=1)
    with pytest.raises(ManifestError) as raised:
        load_manifest(path)
    message = str(raised.value)
    assert "`training.epoch`: unknown key (did you mean `epochs`?)" in message
    assert "`top_k`" in message and "`max_length`" in message and "greater than or equal to 2" in message
    path = edited_manifest(tmp_path, "resnet18", compile={"targets": ["tpu-fp8"]}, kind="images")
    with pytest.raises(
        ManifestError, match=r"`kind` must be one of \['image', 'text'\].*did you mean `image`"
    ):
        load_manifest(path)


def test_every_model_is_reported_at_once(tmp_path: Path) -> None:
    document = yaml.safe_load(DEFAULT_MANIFEST.read_text())
    document["models"]["resnet18"]["weights"]["dowload"] = False
    document["models"]["bert_intent"]["verify"]["atoll"] = 1e-3
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(document))
    with pytest.raises(ManifestError) as raised:
        load_manifest(path)
    assert "did you mean `download`?" in str(raised.value) and "did you mean `atol`?" in str(raised.value)


def test_the_build_refuses_a_typo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tsbatch.archive.pipeline import main

    path = edited_manifest(tmp_path, "bert_intent", max_lenght=64)
    shutil.copy(DEFAULT_MANIFEST.parent / "config.properties", tmp_path / "config.properties")
    with pytest.raises(SystemExit) as exited:
        main(["--manifest", str(path), "--properties", str(tmp_path / "config.properties")])
    assert exited.value.code == 1 and "did you mean `max_length`?" in capsys.readouterr().err


def test_a_manifest_model_gets_its_kind_s_workload() -> None:
    assert load_manifest().kind_of("bert_intent") is TEXT
    assert workload_for("resnet18") is IMAGE.workload


def test_an_unknown_model_names_the_manifest_and_the_way_out() -> None:
    with pytest.raises(UnknownModel) as raised:
        workload_for("some_vision_model")
    message = str(raised.value)
    assert "'some_vision_model' is not in models.yaml" in message
    assert "resnet18, bert_intent" in message and "--requests" in message


def test_a_kind_s_own_command_acts_on_its_first_model() -> None:
    manifest = load_manifest()
    assert manifest.first_of_kind("text") == "bert_intent"
    images_only = Manifest({"resnet18": manifest.model("resnet18")}, manifest.build_dir, manifest.model_store)
    with pytest.raises(ManifestError, match="no model of kind 'text': give --model"):
        images_only.first_of_kind("text")
