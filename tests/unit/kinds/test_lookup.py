"""Tools given a model name find its kind in models.yaml, or say clearly that they cannot."""

from __future__ import annotations

import pytest

from tsbatch.kinds.lookup import UnknownModel, first_of_kind, kind_named, workload_for
from tsbatch.kinds.registry import KINDS


def test_a_manifest_model_gets_its_kind_s_workload() -> None:
    assert kind_named("bert_intent") is KINDS["text"]
    assert workload_for("resnet18") is KINDS["image"].workload


def test_an_unknown_model_names_the_manifest_and_the_way_out() -> None:
    with pytest.raises(UnknownModel) as raised:
        workload_for("some_vision_model")
    message = str(raised.value)
    assert "'some_vision_model' is not in models.yaml" in message
    assert "resnet18, bert_intent" in message and "--requests" in message


def test_a_kind_s_own_command_acts_on_its_first_model() -> None:
    from tsbatch.archive.manifest import Manifest, ManifestError, load_manifest

    manifest = load_manifest()
    assert first_of_kind(KINDS["text"], manifest) == "bert_intent"
    images_only = Manifest({"resnet18": manifest.model("resnet18")}, manifest.build_dir, manifest.model_store)
    with pytest.raises(ManifestError, match="no model of kind 'text': give --model"):
        first_of_kind(KINDS["text"], images_only)
