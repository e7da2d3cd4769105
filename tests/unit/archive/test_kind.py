"""A kind writes its archive's handler config through the worker's own config type, and the
kinds are found through their entry points: a third one from another package included."""

from __future__ import annotations

import dataclasses
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Literal

import pytest
import yaml

from batchkit.config import from_mapping
from text_serving.config import TextModelConfig
from tsbatch.archive import kind as kind_module
from tsbatch.archive.kind import KINDS_GROUP, KindError, installed_kinds, load_kinds
from tsbatch.archive.manifest import ManifestError, load_manifest
from tsbatch.archive.schema import Common, handler_model
from tsbatch.kinds.image.kind import IMAGE
from tsbatch.kinds.text.kind import TEXT
from tsbatch.paths import DEFAULT_MANIFEST


class AudioBuild(Common):
    """A third kind's entry, as another package would declare it."""

    kind: Literal["audio"]


AUDIO = dataclasses.replace(
    TEXT, name="audio", entry=handler_model("AudioModel", AudioBuild, TextModelConfig, {}), handler="audio.py"
)
NOT_A_KIND = "a string"


def point(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=KINDS_GROUP)


# What a distribution holding the toolkit's two kinds and another package's audio kind registers.
POINTS = [
    point("image", "tsbatch.kinds.image.kind:IMAGE"),
    point("text", "tsbatch.kinds.text.kind:TEXT"),
    point("audio", f"{__name__}:AUDIO"),
]

RESOLVED = {"tokenizer_dir": "tokenizer", "base_model": "base", "oos_threshold": 0.4}


def test_the_handler_config_carries_the_manifest_and_what_export_found() -> None:
    spec = load_manifest().model("bert_intent")
    values = TEXT.handler_config(spec.name, spec.config, RESOLVED)
    assert "torch_threads" not in values  # packaging's
    config = from_mapping(TextModelConfig, {**values, "torch_threads": 1})
    assert (config.model_name, config.oos_threshold, config.pass_overhead_tokens) == ("bert_intent", 0.4, 16)
    assert isinstance(values["warmup_batch_sizes"], list)  # plain YAML


def test_an_unknown_or_missing_field_fails_the_build() -> None:
    spec = load_manifest().model("bert_intent")
    with pytest.raises(ValueError, match=r"unknown keys \['oos_treshold'\]"):
        TEXT.handler_config(spec.name, spec.config, {**RESOLVED, "oos_treshold": 0.4})
    with pytest.raises(ValueError, match=r"missing keys \['crop_size'"):
        IMAGE.handler_config("resnet18", load_manifest().model("resnet18").config, {"weights": "w"})


def test_the_installed_kinds_are_the_toolkit_s_entry_points() -> None:
    assert installed_kinds() == {"image": IMAGE, "text": TEXT}


def test_a_third_kind_from_another_package_serves_a_manifest_entry(tmp_path: Path) -> None:
    kinds = load_kinds(POINTS)
    assert kinds["audio"] is AUDIO
    document = yaml.safe_load(DEFAULT_MANIFEST.read_text())
    document["models"]["speech"] = {"kind": "audio", "version": "1.0"}
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(document))
    manifest = load_manifest(path, kinds=kinds)
    assert manifest.model("speech").kind is AUDIO and manifest.kind_of("resnet18") is IMAGE
    assert manifest.model("speech").config.handler == "audio.py"
    assert manifest.first_of_kind("audio") == "speech"


def test_an_unknown_kind_names_the_known_ones(tmp_path: Path) -> None:
    document = yaml.safe_load(DEFAULT_MANIFEST.read_text())
    document["models"]["speech"] = {"kind": "audoi", "version": "1.0"}
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(document))
    with pytest.raises(ManifestError, match=r"`kind` must be one of \['audio', 'image', 'text'\].*`audio`"):
        load_manifest(path, kinds=load_kinds(POINTS))
    with pytest.raises(ManifestError, match=r"`kind` must be one of \['image', 'text'\] \(got 'audoi'\)"):
        load_manifest(path)


def test_an_entry_point_must_be_a_kind_of_its_own_name() -> None:
    with pytest.raises(KindError, match="is not a Kind record"):
        load_kinds([point("audio", f"{__name__}:NOT_A_KIND")])
    with pytest.raises(KindError, match="names kind 'text'"):
        load_kinds([point("audio", "tsbatch.kinds.text.kind:TEXT")])


def test_no_installed_kind_says_how_to_install_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kind_module, "entry_points", lambda group: [])
    with pytest.raises(KindError, match=r"no model kind is installed .*make install"):
        installed_kinds.__wrapped__()
